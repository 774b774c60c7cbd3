import Dispatch
import Postgres

// MARK: - WATCH, UNWATCH, EXPORT, IMPORT

extension Session {
    /// Registers the entity as watched before answering, so every change committed after the
    /// reply is announced.
    func watch(_ entityName: String, predicate: Predicate?, model: Model) throws(CommandError) -> Step {
        let entity = try entity(entityName, model)
        // Checked now, and planned once below: a comparison the column's type lacks is refused
        // at WATCH, not found later when events go unreported.
        let check = try predicate.map { (p: Predicate) throws(CommandError) in try QueryBuilder.count(entity.name, predicate: p, model: model) }
        let previous = watches[entity.name]
        if let previous { context.watching(entity.name, -1, filtered: previous != nil) }
        context.watching(entity.name, +1, filtered: predicate != nil)
        watches[entity.name] = .some(predicate)
        let shared = self.context
        let name = entity.name
        // Refused: the session watches what it watched before.
        let restore: @Sendable (Session) -> Void = { session in
            shared.watching(name, -1, filtered: predicate != nil)
            if let previous { shared.watching(name, +1, filtered: previous != nil) }
            session.watches[name] = previous
        }
        return database(model, undo: restore) { context in
            do {
                if let check { _ = try context.retryingOnce { try context.connection.query("EXPLAIN " + check.sql, check.parameters) } }
            } catch {
                return WorkResult(reply: ErrorMapping.map(error, model: model).reply, apply: restore)
            }
            let reply = Reply.ok("watching \(name)" + (predicate == nil ? "" : " where the predicate matches"))
            do {
                try context.retryingOnce { try ChangeFeed.register(server: shared.serverID, context.connection) { shared.watchedEntities } }
                guard entity.hasRowSecurity else { return WorkResult(reply: reply) }
                // What this user sees now, read before the reply: a delete right after it is
                // judged against this (the server's ledger for the user takes it).
                let seed = try WatchEvents.seed(entity, model: model, context.connection)
                return WorkResult(reply: reply) { session in session.watchSeeds[name] = seed }
            } catch {
                // Not registered, or what the user sees could not be read: not watching.
                return WorkResult(reply: ErrorMapping.map(error, model: model, connection: context.connection).reply, apply: restore)
            }
        }
    }

    /// The session ends: its watches end too.
    public func close() {
        for (entity, predicate) in watches { context.watching(entity, -1, filtered: predicate != nil) }
        watches.removeAll()
        user = nil
    }

    func unwatch(_ entityName: String?, model: Model) throws(CommandError) -> Reply {
        guard let entityName else {
            let count = watches.count
            close()
            return .ok("stopped watching \(count) entit\(count == 1 ? "y" : "ies")")
        }
        let entity = try entity(entityName, model)
        guard let previous = watches.removeValue(forKey: entity.name) else { throw CommandError(.notFound, "not watching \(entity.name)") }
        context.watching(entity.name, -1, filtered: previous != nil)
        return .ok("stopped watching \(entity.name)")
    }

    /// The records as CSV, a header of column names first, streamed by PostgreSQL's
    /// `COPY (SELECT ...) TO STDOUT`. COPY takes no parameters, so a WHERE's values are
    /// inlined as literals quoted by libpq. Dot-stuffed: a physical line starting with `.`,
    /// `+`, `-` or `!` gets one more `.` in front, which readers drop. Binary columns are
    /// PostgreSQL's hex (`\\x0aff`), as COPY writes them.
    func export(_ request: FetchRequest, model: Model) throws(CommandError) -> Step {
        let entity = try entity(request.entity, model)
        // Generated columns are PostgreSQL's to compute: an IMPORT of the file computes them again.
        let columns = entity.columns.map(\.column).filter { !entity.isGenerated(column: $0) }
        let select = try QueryBuilder.select(request, model: model)
        // The same rows as the FIND, with the table's own columns in front of its body (or the
        // selected key paths, each column named by its path).
        let list = select.projection.isEmpty ? columns.map { "t0.\(SQL.identifier($0))" }
            : select.projection.map { "\($0.sql) AS \(SQL.identifier($0.key))" }
        let query = (select.distinct ? "SELECT DISTINCT " : "SELECT ") + list.joined(separator: ", ") + select.body
        let header = select.projection.isEmpty ? columns : select.projection.map(\.key)
        let snapshot = self.snapshot
        let timeout = context.work.bulkTimeout
        let stall = context.work.replyStall
        return database(model, hold: .streams) { context in
            // Like every read, EXPORT sees the session's pending changes.
            let ((count, _), view) = try context.withView(snapshot, model: model) { view -> (Int, Int) in
                let connection = context.connection
                var expired = false
                let export = { () throws -> Int in
                    // The COPY may run --bulk-timeout, not a read's statement timeout; the
                    // stream's own clock decides (`Session.stream`), PostgreSQL's five seconds later.
                    let deadline = DispatchTime.now() + .milliseconds(timeout)
                    try connection.query("SELECT set_config('statement_timeout', $1, true)", [String(timeout + Self.bulkTimeoutGrace)])
                    // A whole table is read by COPY itself where the catalog lets it, as FIND's
                    // stream reads it (`Select.copyOut`).
                    let whole = try select.readsWholeQuery.map { try connection.query($0.sql, $0.parameters).string(0, 0) == "t" } ?? false
                    let sql = if whole, let table = select.wholeTable {
                        SQL.copyOut(table: table, columns, options: "FORMAT csv")
                    } else {
                        try SQL.copyOut(query, select.parameters, options: "FORMAT csv", literal: connection.escapeLiteral)
                    }
                    var batch = StreamBatch(to: context.sink)
                    var headerLine: [UInt8] = []
                    CSV.appendLine(header.map { Array($0.utf8) }, to: &headerLine)
                    headerLine.withUnsafeBytes { batch.append($0) }
                    let count = try connection.copyOut(sql) { record in
                        CSV.appendRecord(record, to: &batch)
                        guard batch.sendIfFull() else { return false }
                        guard batch.count == 0, DispatchTime.now() >= deadline else { return true }
                        expired = true
                        return false
                    }
                    batch.finish()
                    return count
                }
                // In the view's transaction when it began one (pending changes), else in one
                // of its own: a local setting needs a transaction to hold it.
                let count = try view.began ? export() : connection.transaction(export)
                if context.sink.stalled {
                    throw CommandError(.limit, "the client read nothing for \(stall) s: the EXPORT stopped after \(count) record(s), to free its connection")
                }
                if context.sink.stopping {
                    throw CommandError(.unavailable, "the server is stopping: the EXPORT stopped after \(count) record(s); ask again on another server (after RESUME when a hand-off token follows)")
                }
                if expired { throw Self.ranPastBulkTimeout("EXPORT", timeout, count) }
                return (count, 0)
            }
            let allocated = view.allocated
            return WorkResult(reply: .ok("exported \(count) record\(count == 1 ? "" : "s")" + view.note), streamedRows: count) { session in
                session.unit.assign(allocated)
            }
        }
    }

    func importJob(_ entityName: String, columns: [String]?, model: Model) throws(CommandError) -> ImportJob {
        let entity = try entity(entityName, model)
        if let columns { _ = try ImportJob.check(columns, entity: entity) }
        return ImportJob(entity: entity, table: model.table(entity), columns: columns, model: model, session: id,
                         timeout: context.work.bulkTimeout, identity: identity, keys: context.work.keys)
    }
}

/// An IMPORT waiting for its data: the server gathers the lines up to `.` and runs it.
public struct ImportJob: Sendable {
    let entity: Entity
    let table: String
    let columns: [String]?
    let model: Model
    let session: Int
    /// `statement_timeout` of the COPY's transaction, milliseconds.
    let timeout: Int
    /// Who the rows are written as: policies' `WITH CHECK` decide which it may import.
    let identity: Identity
    /// The server's reserved keys, dropped for a sequence the import moves.
    let keys: KeyReserve?

    /// Column names checked against the model: attributes and foreign-key columns, by exact
    /// name first (`Name` and `name` are two columns), else case-insensitively when unique.
    static func check(_ names: [String], entity: Entity) throws(CommandError) -> [String] {
        try names.enumerated().map { (index: Int, name: String) throws(CommandError) -> String in
            var trimmed = name.trimmingCharacters(in: .whitespaces)
            if index == 0, trimmed.hasPrefix("\u{FEFF}") { trimmed.removeFirst() }  // a byte-order mark before the header
            guard let column = entity.column(named: trimmed) else {
                throw CommandError(.unknown, "IMPORT: \(entity.name) has no column '\(trimmed)'")
            }
            if entity.isGenerated(column: column) {
                throw CommandError(.validation, "IMPORT: \(entity.name).\(column) is generated by PostgreSQL: leave it out")
            }
            return column
        }
    }

    /// Whether the first data line is the header (no columns were named).
    public var takesHeader: Bool { columns == nil }

    /// Loads the data `next` hands over (dot-stuffing already removed, the header taken off)
    /// with one COPY: all rows or none.
    /// - Parameter cancelled: whether the server cancelled the COPY (it is stopping).
    public func run(header: String?, next: () -> Connection.CopyChunk, on connection: Connection, cancelled: () -> Bool = { false }) -> Reply {
        let columns: [String]
        do {
            if let given = self.columns {
                columns = try Self.check(given, entity: entity)
            } else {
                guard let header else { return .error(.validation, "IMPORT: no header line (the column names)") }
                columns = try Self.check(CSV.split(header), entity: entity)
            }
        } catch {
            return error.reply
        }
        let sql = "COPY \(table) (\(columns.map(SQL.identifier).joined(separator: ", "))) FROM STDIN WITH (FORMAT csv)"
        // Key columns with a sequence that the data gives values for: the sequence moves past
        // the largest, in the same transaction, so the next insert does not collide.
        let bumps = entity.key.filter { key in key.drawsFrom != nil && columns.contains(key.name) && key.kind.isInteger }
        do {
            try connection.assume(identity)
            try connection.execute("BEGIN")
            try connection.query("SELECT set_config('statement_timeout', $1, true)", [String(timeout)])
            let rows = !entity.takesCopy ? try copyThroughInsert(columns, next: next, on: connection)
                                             : try connection.copyIn(sql, next: next)
            for key in bumps {
                try connection.query("""
                    SELECT setval($1::regclass, m) FROM (SELECT max(\(SQL.identifier(key.name)))::bigint AS m FROM \(table)) AS s
                    WHERE m > coalesce(pg_sequence_last_value($1::regclass), 0)
                    """, [key.drawsFrom])
            }
            try connection.execute("COMMIT")
            for key in bumps { if let sequence = key.drawsFrom { keys?.drop(sequence) } }
            Log.info("imported \(rows) \(entity.name) records", session: session)
            return .ok("imported \(rows) record\(rows == 1 ? "" : "s")")
        } catch {
            if connection.isHealthy, connection.inTransaction { _ = try? connection.execute("ROLLBACK") }
            // COPY counts its own lines from 1; the client's include the header.
            let offset = self.columns == nil ? 1 : 0
            var message = error.message
            if let line = Self.copyLine(error.context, table: entity.name) { message = "line \(line + offset): \(message)" }
            if error.isUnavailable { return .error(.unavailable, "PostgreSQL is unavailable (\(error.message)); nothing was imported") }
            if error.sqlState == .queryCanceled && cancelled() {
                return .error(.unavailable, "the server is stopping: this IMPORT was cancelled before it committed; nothing was imported: send it again on another server (after RESUME when a hand-off token follows)")
            }
            return .error(.validation, "IMPORT failed, nothing was imported: \(message)")
        }
    }

    /// PostgreSQL refuses COPY FROM into a table whose policies apply, and COPY would pass a
    /// rule on INSERT by (`Entity.takesCopy`): the lines are copied into a temporary table,
    /// numbered as they come, then inserted, each row under the policies' WITH CHECK and the
    /// rules. A refused row is found by halving the lines under savepoints
    /// (only when the insert failed) so the error names its line, as COPY's own would.
    private func copyThroughInsert(_ columns: [String], next: () -> Connection.CopyChunk, on connection: Connection) throws(PostgresError) -> Int {
        let list = columns.map(SQL.identifier).joined(separator: ", ")
        let staging = "pg_temp.records_import"
        try connection.execute("DROP TABLE IF EXISTS \(staging)")
        try connection.execute("CREATE TEMP TABLE records_import ON COMMIT DROP AS SELECT \(list) FROM \(table) WITH NO DATA")
        try connection.execute("ALTER TABLE \(staging) ADD COLUMN records_line bigint GENERATED ALWAYS AS IDENTITY")
        let rows = try connection.copyIn("COPY \(staging) (\(list)) FROM STDIN WITH (FORMAT csv)", next: next)
        let insert = "INSERT INTO \(table) (\(list)) SELECT \(list) FROM \(staging) WHERE records_line BETWEEN $1 AND $2 ORDER BY records_line"
        try connection.execute("SAVEPOINT records_import")
        do {
            try connection.query(insert, ["1", String(rows)])
            return rows
        } catch let whole {
            // Halve [low, high] down to the first line that fails alone.
            var (low, high) = (1, rows)
            while low < high {
                try connection.execute("ROLLBACK TO SAVEPOINT records_import")
                let middle = (low + high) / 2
                let result = Result { () throws(PostgresError) in try connection.query(insert, [String(low), String(middle)]) }
                if case .failure = result { high = middle } else { low = middle + 1 }
            }
            try connection.execute("ROLLBACK TO SAVEPOINT records_import")
            let alone = Result { () throws(PostgresError) in try connection.query(insert, [String(low), String(low)]) }
            guard case .failure(var error) = alone else { throw whole }
            error.context = "COPY \(entity.name), line \(low)"
            throw error
        }
    }

    /// The line COPY failed on, from its error's context (`COPY employee, line 3, column age:
    /// ...`), in any language PostgreSQL speaks: the number after the word that follows the
    /// table's name (`ligne 3`, `Zeile 3`).
    static func copyLine(_ context: String?, table: String) -> Int? {
        let prefix = "COPY \(table), "
        guard let context, context.hasPrefix(prefix) else { return nil }
        let rest = context.dropFirst(prefix.count).drop { $0 != " " }.dropFirst()
        return Int(rest.prefix { $0.isNumber })
    }
}
