import Postgres

/// One SQL statement a plan asks to run: its text (built from the model, never from a client's
/// text) and its values, always bound as parameters, or for `COPY ... FROM STDIN`, sent as
/// the copy's data.
public struct Statement: Sendable, Equatable, CustomStringConvertible {
    public var sql: String
    public var parameters: [String?]
    /// The rows of a `COPY ... FROM STDIN` in its text format (`CopyText`); nil for others.
    public var copyData: [UInt8]?

    public init(_ sql: String, _ parameters: [String?] = []) {
        self.sql = sql
        self.parameters = parameters
    }

    /// `COPY sql FROM STDIN` fed `data`.
    public init(copy sql: String, data: [UInt8]) {
        self.sql = sql
        self.parameters = []
        self.copyData = data
    }

    public var description: String {
        if let copyData { return sql + " (\(copyData.count) bytes)" }
        return sql + (parameters.isEmpty ? "" : " " + String(describing: parameters))
    }

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
    /// per connection; those without (BEGIN, COMMIT, SET CONSTRAINTS) go as text. A COPY
    /// cannot be in a pipeline: it goes between the pipelines of the statements around it, and
    /// those after a failure are not sent, as a pipeline would skip them. `meanwhile` runs
    /// while PostgreSQL works on the round's first COPY, or on its pipeline when it has none
    /// (not at all when the round fails first).
    static func run(_ statements: [Statement], on connection: Connection, meanwhile: () -> Void = {}) -> RoundResult {
        var results: [StatementResult] = []
        results.reserveCapacity(statements.count)
        let firstCopy = statements.firstIndex { $0.copyData != nil }
        var start = 0
        while start < statements.count {
            let copy = statements[start...].firstIndex { $0.copyData != nil } ?? statements.count
            do {
                if copy > start {
                    let segment = statements[start..<copy]
                    let done = try connection.pipeline(segment.map { ($0.sql, $0.parameters) },
                                                       prepared: { !segment[start + $0].parameters.isEmpty },
                                                       meanwhile: { if firstCopy == nil { meanwhile() } })
                    results += done.map(StatementResult.init)
                }
                if copy < statements.count, let data = statements[copy].copyData {
                    var sent = false
                    let rows = try connection.copyIn(statements[copy].sql, meanwhile: { if copy == firstCopy { meanwhile() } }) {
                        defer { sent = true }
                        return sent ? .end : .data(data)
                    }
                    results.append(StatementResult(affected: rows))
                }
            } catch let failure as Connection.PipelineFailure {
                return .failure(index: start + failure.index, error: failure.error)
            } catch let error as PostgresError {
                return .failure(index: min(copy, results.count), error: error)
            } catch {
                return .failure(index: results.count, error: PostgresError(kind: .unexpected, message: String(describing: error)))
            }
            start = copy + 1
        }
        return .success(results)
    }
}
