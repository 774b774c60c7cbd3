import Foundation
import Postgres

/// Turns PostgreSQL's errors into the protocol's codes and into words a user understands,
/// naming the record and field where they are known. Decided from the SQLSTATE and libpq's
/// diagnostic fields (table, column, constraint) with the model, never from the message's
/// words, which PostgreSQL translates (`lc_messages`).
enum ErrorMapping {
    /// What the failing statement did, for the words of its error.
    struct Failed {
        enum Operation { case insert, update, delete }
        var operation: Operation?
        /// How the record is named (`#e1`, `employee 7`), when one record failed.
        var record: String?
        /// The record's values as the unit has them, by column.
        var values: [String: String] = [:]

        init(operation: Operation? = nil, record: String? = nil, values: [String: String] = [:]) {
            self.operation = operation
            self.record = record
            self.values = values
        }

        /// The operation and values of one pending change.
        init(_ change: ChangeID, in changes: ChangeSet, record: String?) {
            self.record = record
            switch change {
            case .insert(let ref):
                operation = .insert
                for (column, value) in changes.insert(ref)?.fields ?? [] { if let text = value.text { values[column] = text } }
            case .update(let key):
                operation = .update
                for (column, value) in changes.updates[key]?.fields ?? [:] { if let text = value.text { values[column] = text } }
            case .delete:
                operation = .delete
            case .bulk(let index):
                operation = changes.bulk[index].isDelete ? .delete : .update
            }
        }
    }

    static func map(_ error: Error, model: Model, connection: Connection? = nil) -> CommandError {
        switch error {
        case let error as CommandError: return error
        case let error as PostgresError: return map(error, failed: Failed(), model: model, connection: connection)
        default: return CommandError(.internal, String(describing: error))
        }
    }

    static func map(_ error: PostgresError, failed: Failed, model: Model, connection: Connection?) -> CommandError {
        if error.isUnavailable {
            return CommandError(.unavailable, "PostgreSQL is unavailable (\(error.message)); pending changes are kept: try again when it is back")
        }
        let subject = failed.record.map { $0 + ": " } ?? ""
        let table = error.table.flatMap { model.entity(named: $0) }
        let constraint = error.constraint ?? "?"
        switch error.sqlState {
        case .uniqueViolation?:
            return uniqueViolation(subject: subject, constraint: constraint, table: table, failed: failed)
        case .foreignKeyViolation?:
            return foreignKeyViolation(error, subject: subject, constraint: constraint, table: table, failed: failed, model: model)
        case .checkViolation?:
            return checkViolation(error, subject: subject, connection: connection)
        case .notNullViolation?:
            let column = error.column ?? "?"
            return CommandError(.validation, "\(subject)\(table?.label(column) ?? column) is required")
        case .serializationFailure?, .deadlockDetected?:
            return CommandError(.conflict, "\(subject)\(error.message) (still failing after \(SavePlan.maxAttempts) attempts)")
        case .queryCanceled?:
            // One SQLSTATE for a timeout and for a cancel asked of PostgreSQL (pg_cancel_backend):
            // only its message tells them apart, which is not ours to read.
            return CommandError(.limit, "\(subject)the statement was cancelled: it ran past its time limit, or PostgreSQL was asked to cancel it")
        case .lockNotAvailable?:
            return CommandError(.conflict, "\(subject)a record stayed locked by another transaction past the lock time limit: try again")
        case let state? where state.errorClass == "22" || state.errorClass == "23":
            return CommandError(.validation, "\(subject)\(error.message)")
        case .undefinedFunction?:
            // A comparison or an order the column's type does not have (json ==, ORDER BY point).
            return CommandError(.validation, "\(subject)\(error.message)")
        case .featureNotSupported?:
            // What the column's type cannot do with the value given (a composite type's value
            // compared as text): the request's, not the server's fault.
            return CommandError(.validation, "\(subject)PostgreSQL cannot do this: \(error.message)")
        case .raiseException?:
            // The schema's own trigger or check function said no: its words are the reason.
            return CommandError(.validation, "\(subject)\(error.message)")
        case .insufficientPrivilege?:
            // A grant or a row-level security policy of the database said no.
            return CommandError(.forbidden, "\(subject)PostgreSQL refused it: \(error.message)")
        case .datatypeMismatch? where failed.operation == .insert || failed.operation == .update:
            // A write casts each value to the type the model read: a mismatch is a column
            // whose type changed since.
            fallthrough
        case .undefinedColumn?, .undefinedTable?:
            // Names come from the model, read from the catalog: the schema changed under it
            // (a column or table dropped or renamed without `recordsd migrate`).
            // A read saves nothing and says nothing of it (a helper found FIND saying "nothing was saved").
            let saved = failed.operation == nil ? "" : "; nothing was saved"
            return CommandError(.validation, "\(subject)the database's schema changed since the server read it (\(error.message))\(saved): it reads it again at the next `recordsd migrate` or SIGHUP")
        case let state? where state.errorClass == "54":
            // Program limits: a statement too complex, a stack too deep, too many columns.
            return CommandError(.limit, "\(subject)too large for PostgreSQL: \(error.message)")
        case let state? where state.errorClass == "42" && state != .undefinedTable:
            return CommandError(.internal, "\(subject)\(error.message)")
        default:
            return CommandError(.internal, "\(subject)\(error.description)")
        }
    }

    private static func uniqueViolation(subject: String, constraint: String, table: Entity?, failed: Failed) -> CommandError {
        let columns = table?.uniqueConstraints[constraint] ?? []
        let what: String
        if columns.count == 1, let table {
            let value = failed.values[columns[0]].map { " " + show($0, column: columns[0], in: table) } ?? ""
            what = "\(table.label(columns[0]))\(value) is already taken"
        } else if let table, !columns.isEmpty {
            what = "(" + columns.map(table.label).joined(separator: ", ") + ") is already taken"
        } else {
            what = "a unique value is already taken"
        }
        return CommandError(.validation, "\(subject)\(what) (unique constraint \(constraint))")
    }

    /// The table is the one whose key points (the referencing side), whichever side failed.
    private static func foreignKeyViolation(_ error: PostgresError, subject: String, constraint: String, table: Entity?,
                                            failed: Failed, model: Model) -> CommandError {
        let key = model.entities.lazy.flatMap(\.foreignKeys).first { $0.names(error.constraint) }
        let pointing = table?.name ?? key?.entity ?? "other"
        switch failed.operation {
        case .delete?:
            return CommandError(.denied, "\(subject)the delete is denied: \(pointing) records still point at it (constraint \(constraint))")
        // The update changed what the key references (a key, a unique value), not the
        // key's own columns: records still point at the old value (a self-reference too).
        case .update? where key.map({ key in
            failed.values.keys.contains(where: key.referencedColumns.contains) && !failed.values.keys.contains(where: key.columns.contains)
        }) ?? false:
            return CommandError(.denied, "\(subject)\(pointing) records still point at the value it had: move them first, or give the key ON UPDATE CASCADE (constraint \(constraint))")
        default:
            guard let key, let source = model.entity(named: key.entity) else {
                return CommandError(.validation, "\(subject)a record it points at does not exist (constraint \(constraint))")
            }
            let name = key.columns.count == 1 ? source.label(key.columns[0]) : "(" + key.columns.joined(separator: ", ") + ")"
            let value = key.columns.count == 1 ? failed.values[key.columns[0]].map { " " + $0 } ?? "" : ""
            return CommandError(.validation, "\(subject)\(name)\(value) does not exist in \(key.target)")
        }
    }

    /// The constraint's definition is asked of PostgreSQL when the connection can say it.
    private static func checkViolation(_ error: PostgresError, subject: String, connection: Connection?) -> CommandError {
        guard let name = error.constraint else {
            return CommandError(.validation, "\(subject)no check of \(error.table ?? "the table") lets it in (a partition for it may be missing)")
        }
        var definition = ""
        if let connection, connection.isHealthy, !connection.inTransaction,
           let text = try? connection.query("SELECT pg_get_constraintdef(oid) FROM pg_constraint WHERE conname = $1 LIMIT 1", [name]).string(0, 0) {
            definition = ": " + text
        }
        return CommandError(.validation, "\(subject)violates check constraint \(name)\(definition)")
    }

    /// A value as a command takes it: quoted unless its attribute is a number.
    private static func show(_ value: String, column: String, in entity: Entity) -> String {
        switch entity.attribute(named: column)?.kind ?? entity.keyKind(column) {
        case .integer, .decimal, .double: value
        default: JSON.quote(value)
        }
    }
}

extension FieldValue {
    /// The bind text of a value the client gave, nil for nil; a #ref shows as itself.
    var text: String? {
        switch self {
        case .null: nil
        case .text(let text): text
        case .ref(let ref): "#" + ref
        }
    }
}
