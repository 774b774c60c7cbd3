import Postgres

/// One SQL statement a plan asks to run: its text (built from the model, never from a client's
/// text) and its values, always bound as parameters.
public struct Statement: Sendable, Equatable, CustomStringConvertible {
    public var sql: String
    public var parameters: [String?]

    public init(_ sql: String, _ parameters: [String?] = []) {
        self.sql = sql
        self.parameters = parameters
    }

    public var description: String { sql + (parameters.isEmpty ? "" : " " + String(describing: parameters)) }

    static let begin = Statement("BEGIN")
    static let commit = Statement("COMMIT")
    static let rollback = Statement("ROLLBACK")
}

/// What a statement returned: its rows as text, and the rows it changed.
public struct StatementResult: Sendable, Equatable {
    public var rows: [[String?]]
    public var affected: Int

    public init(rows: [[String?]] = [], affected: Int = 0) {
        self.rows = rows
        self.affected = affected
    }

    init(_ result: QueryResult) {
        var rows: [[String?]] = []
        rows.reserveCapacity(result.rowCount)
        for row in 0..<result.rowCount {
            rows.append((0..<result.columnCount).map { result.string(row, $0) })
        }
        self.init(rows: rows, affected: result.affectedRows)
    }
}

/// How a round of statements, sent together, came back.
public enum RoundResult: Sendable {
    case success([StatementResult])
    /// Statement `index` failed; those after it did not run.
    case failure(index: Int, error: PostgresError)

    /// Runs `statements` as one pipeline (one round trip) on `connection`. Statements with
    /// parameters (the model's writes, reads and locks, built once per shape) are prepared once
    /// per connection; those without (BEGIN, COMMIT, SET CONSTRAINTS) go as text.
    static func run(_ statements: [Statement], on connection: Connection) -> RoundResult {
        do {
            let results = try connection.pipeline(statements.map { ($0.sql, $0.parameters) },
                                                  prepared: { !statements[$0].parameters.isEmpty })
            return .success(results.map(StatementResult.init))
        } catch let failure as Connection.PipelineFailure {
            return .failure(index: failure.index, error: failure.error)
        } catch let error as PostgresError {
            return .failure(index: 0, error: error)
        } catch {
            return .failure(index: 0, error: PostgresError(kind: .unexpected, message: String(describing: error)))
        }
    }
}
