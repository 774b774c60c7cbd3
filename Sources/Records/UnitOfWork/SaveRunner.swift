import Postgres

/// SAVE from start to finish: validation, one transaction, bounded retries of serialization
/// failures and deadlocks, and errors that name the record and field.
enum SaveRunner {
    struct Saved: Sendable {
        var outcome: Saver.Outcome
        var attempts: Int
    }

    static let maxAttempts = 3

    static func save(_ changes: ChangeSet, policy: MergePolicy, model: Model,
                     connection: Connection) -> Result<Saved, CommandError> {
        let saver = Saver(model: model, connection: connection, changes: changes)
        let problems = saver.validate()
        if !problems.isEmpty {
            return .failure(CommandError(.validation, "\(problems.count) problem(s); nothing was saved", details: problems))
        }
        var attempt = 0
        while true {
            attempt += 1
            do {
                var outcome = Saver.Outcome()
                try saver.save(policy: policy, outcome: &outcome)  // BEGIN ... COMMIT, pipelined
                return .success(Saved(outcome: outcome, attempts: attempt))
            } catch {
                if connection.isHealthy, connection.inTransaction { _ = try? connection.execute("ROLLBACK") }
                if attempt < maxAttempts, isRetryable(error) { continue }
                if let failure = error as? Saver.Failure, failure.records.count > 1,
                   failure.error.sqlState?.errorClass == "23" || failure.error.sqlState?.errorClass == "22",
                   let precise = diagnose(changes, model: model, connection: connection) {
                    return .failure(ErrorMapping.map(precise, model: model, connection: connection))
                }
                return .failure(ErrorMapping.map(error, model: model, connection: connection))
            }
        }
    }

    /// Replays the unit one row per statement in a transaction that is rolled back, to find the
    /// record a multi-row statement failed on.
    private static func diagnose(_ changes: ChangeSet, model: Model, connection: Connection) -> Saver.Failure? {
        var saver = Saver(model: model, connection: connection, changes: changes)
        saver.rowsPerStatement = 1
        defer { if connection.isHealthy, connection.inTransaction { _ = try? connection.execute("ROLLBACK") } }
        do {
            try connection.execute("BEGIN")
            _ = try saver.apply()
        } catch let failure as Saver.Failure {
            return failure
        } catch {}
        return nil
    }

    static func isRetryable(_ error: Error) -> Bool {
        let state = (error as? PostgresError)?.sqlState ?? (error as? Saver.Failure)?.error.sqlState
        return state == .serializationFailure || state == .deadlockDetected
    }
}
