import Foundation
import Postgres

/// Turns PostgreSQL's errors into the protocol's codes and into words a user understands,
/// naming the record and field where they are known.
enum ErrorMapping {
    static func map(_ error: Error, model: Model, connection: Connection? = nil) -> CommandError {
        switch error {
        case let error as CommandError: return error
        case let error as PostgresError: return map(error, record: nil, model: model, connection: connection)
        default: return CommandError(.internal, String(describing: error))
        }
    }

    static func map(_ error: PostgresError, record: String?, model: Model, connection: Connection?) -> CommandError {
        if error.isUnavailable {
            return CommandError(.unavailable, "PostgreSQL is unavailable (\(error.message)); pending changes are kept: try again when it is back")
        }
        let subject = record.map { $0 + ": " } ?? ""
        let table = error.table.flatMap { model.entity(named: $0) }
        let key = parseKey(error.detail)
        switch error.sqlState {
        case .uniqueViolation?:
            let what = key.map { "\($0.column) \(quoteIfText($0.value, column: $0.column, entity: table)) is already taken" } ?? "a unique value is already taken"
            return CommandError(.validation, "\(subject)\(what) (unique constraint \(error.constraint ?? "?"))")
        case .foreignKeyViolation?:
            if error.message.contains("still referenced") || error.detail?.contains("still referenced") == true {
                let from = error.detail.flatMap { detail -> String? in
                    guard let r = detail.range(of: "from table \"") else { return nil }
                    return String(detail[r.upperBound...].prefix { $0 != "\"" })
                } ?? "another entity"
                return CommandError(.denied, "\(subject)the delete is denied: \(from) records still point at it (constraint \(error.constraint ?? "?"))")
            }
            let relationship = key.flatMap { k in table?.toOneRelationships.first { $0.column == k.column } }
            if let relationship, let key {
                return CommandError(.validation, "\(subject)\(relationship.name) \(key.value) does not exist in \(relationship.target)")
            }
            return CommandError(.validation, "\(subject)\(error.message)")
        case .checkViolation?:
            var definition = ""
            if let connection, let name = error.constraint, connection.isHealthy, !connection.inTransaction,
               let text = try? connection.query("SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = $1 LIMIT 1", [name]).string(0, 0) {
                definition = ": " + text
            }
            return CommandError(.validation, "\(subject)violates check constraint \(error.constraint ?? "?")\(definition)")
        case .notNullViolation?:
            let column = error.column ?? "?"
            let name = table?.toOneRelationships.first { $0.column == column }?.name ?? column
            return CommandError(.validation, "\(subject)\(name) is required")
        case .serializationFailure?, .deadlockDetected?:
            return CommandError(.conflict, "\(subject)\(error.message) (still failing after \(SavePlan.maxAttempts) attempts)")
        case .queryCanceled?:
            return CommandError(.limit, "\(subject)the statement ran past its time limit and was cancelled")
        case .lockNotAvailable?:
            return CommandError(.conflict, "\(subject)a record stayed locked by another transaction past the lock time limit: try again")
        case let state? where state.errorClass == "22":
            return CommandError(.validation, "\(subject)\(error.message)")
        case let state? where state.errorClass == "42" && state != .undefinedTable:
            return CommandError(.internal, "\(subject)\(error.message)")
        default:
            return CommandError(.internal, "\(subject)\(error.description)")
        }
    }

    /// `Key (name)=(Chess) already exists.` -> ("name", "Chess").
    static func parseKey(_ detail: String?) -> (column: String, value: String)? {
        guard let detail, let open = detail.range(of: "Key ("), let mid = detail.range(of: ")=(", range: open.upperBound..<detail.endIndex)
        else { return nil }
        let column = String(detail[open.upperBound..<mid.lowerBound])
        guard let close = detail.range(of: ")", options: .backwards, range: mid.upperBound..<detail.endIndex) else { return nil }
        return (column, String(detail[mid.upperBound..<close.lowerBound]))
    }

    private static func quoteIfText(_ value: String, column: String, entity: Entity?) -> String {
        entity?.attribute(named: column)?.kind == .string ? JSON.quote(value) : value
    }
}
