import Postgres

// MARK: - GET, FIND, COUNT, SAVE

extension Session {
    /// Runs `body` with the unit's pending changes applied inside a transaction that is rolled
    /// back afterwards, so reads see them while PostgreSQL stays the judge (Core Data's
    /// includesPendingChanges). `body` gets the ids the pending inserts have in that view.
    func withPendingChanges<T>(_ model: Model, _ connection: Connection, _ body: ([String: String]) throws -> T) throws -> T {
        let changes = unit.current
        if changes.isEmpty { return try body([:]) }
        let saver = Saver(model: model, connection: connection, changes: changes)
        let problems = saver.validate()
        if !problems.isEmpty {
            throw CommandError(.validation, "reads see pending changes, and these cannot be applied yet: fix them or ROLLBACK", details: problems)
        }
        try connection.execute("BEGIN")
        defer { if connection.isHealthy { _ = try? connection.execute("ROLLBACK") } }
        let ids = try saver.apply()
        return try body(ids)
    }

    func get(_ entityName: String, id: RecordID, include: [String], model: Model) throws(CommandError) -> Step {
        let entity = try entity(entityName, model)
        let storedID: String?
        switch id {
        case .stored(let text): storedID = try self.storedID(text, of: entity)
        case .pending(let ref):
            guard let pending = unit.current.insert(ref), pending.entity == entity.name else {
                throw CommandError(.notFound, "no pending \(entity.name) #\(ref) in this unit of work")
            }
            storedID = nil
        }
        let request = FetchRequest(entity: entity.name, include: include)
        _ = try QueryBuilder.select(request, model: model, keyFilter: "0")  // names checked before any I/O
        return database(model) { [self] connection in
            try withPendingChanges(model, connection) { ids in
                let key: String
                if let storedID { key = storedID } else if case .pending(let ref) = id, let assigned = ids[ref] { key = assigned } else {
                    throw CommandError(.notFound, "no \(entity.name) \(id)")
                }
                let select = try QueryBuilder.select(request, model: model, keyFilter: key)
                let result = try connection.queryPrepared(select.sql, select.parameters)
                guard result.rowCount == 1 else { throw CommandError(.notFound, "no \(entity.name) with id \(key)") }
                return .ok("1 record", lines: [select.encoder.line(result, row: 0)])
            }
        }
    }

    /// Rows stream to the client as PostgreSQL produces them (a server-side cursor), in
    /// batches, waiting while the client is slow to read: memory stays flat whatever the size.
    func find(_ request: FetchRequest, model: Model) throws(CommandError) -> Step {
        let select = try QueryBuilder.select(request, model: model)
        return streaming(model) { [self] connection, sink in
            try withPendingChanges(model, connection) { _ in
                var count = 0
                var more = false
                var lastKeys: [String?] = []
                let keyStart = select.encoder.count
                try Self.stream(select.sql, select.parameters, on: connection, to: sink) { result, row, batch in
                    if let limit = request.limit, count == limit {
                        more = true  // the extra row LIMIT n+1 fetched: another page follows
                        return false
                    }
                    select.encoder.append(result, row: row, to: &batch)
                    count += 1
                    if select.cursorColumns > 0 { lastKeys = (0..<select.cursorColumns).map { result.string(row, keyStart + $0) } }
                    return true
                }
                var message = "\(count) record\(count == 1 ? "" : "s")"
                if more { message += "; next page: AFTER " + Cursor.encode(lastKeys, fingerprint: select.fingerprint) }
                return .ok(message)
            }
        }
    }

    /// Runs `sql` through the prefetching cursor, letting `encode` write each row into the
    /// batch (false: stop), and hands the batch to the sink as it fills.
    static func stream(_ sql: String, _ parameters: [String?], on connection: Connection, to sink: LineSink,
                       encode: (QueryResult, Int, inout [UInt8]) -> Bool) throws {
        var batch = StreamBatch(to: sink)
        try connection.stream(sql, parameters) { result in
            for row in 0..<result.rowCount {
                guard encode(result, row, &batch.bytes), batch.sendIfFull() else { return false }
            }
            return true
        }
        batch.finish()
    }

    func count(_ entityName: String, predicate: Predicate?, estimate: Bool, model: Model) throws(CommandError) -> Step {
        let query = try QueryBuilder.count(entityName, predicate: predicate, model: model)
        if estimate {
            // The planner's row estimate for the same filter: no rows are read.
            let sql = "EXPLAIN (FORMAT JSON) " + query.sql.replacingOccurrences(of: "SELECT count(*) FROM", with: "SELECT 1 FROM")
            return database(model) { connection in
                let plan = try connection.query(sql, query.parameters).string(0, 0) ?? ""
                guard let rows = Self.planRows(plan) else { throw CommandError(.internal, "no estimate in the plan") }
                return .ok("\(rows) estimated")
            }
        }
        return database(model) { [self] connection in
            try withPendingChanges(model, connection) { _ in
                let result = try connection.queryPrepared(query.sql, query.parameters)
                return .ok(result.string(0, 0) ?? "0")
            }
        }
    }

    /// `EXPLAIN (FORMAT JSON)`'s top "Plan Rows".
    static func planRows(_ json: String) -> Int? {
        guard let range = json.range(of: "\"Plan Rows\": ") else { return nil }
        return Int(json[range.upperBound...].prefix { $0.isNumber })
    }

    func explain(_ request: FetchRequest, model: Model) throws(CommandError) -> Step {
        let sql: String
        let parameters: [String?]
        if request.limit == 0 && request.order.isEmpty && request.include.isEmpty {
            (sql, parameters) = try QueryBuilder.count(request.entity, predicate: request.predicate, model: model)
        } else {
            let select = try QueryBuilder.select(request, model: model)
            (sql, parameters) = (select.sql, select.parameters)
        }
        return database(model) { connection in
            let plan = try connection.query("EXPLAIN " + sql, parameters)
            let shown = "[" + parameters.map { $0.map(JSON.quote) ?? "null" }.joined(separator: ",") + "]"
            let lines = ["sql: " + sql, "parameters: " + shown] + (0..<plan.rowCount).map { plan.string($0, 0) ?? "" }
            return .ok("plan", lines: lines)
        }
    }

    func save(_ policy: MergePolicy, model: Model) throws(CommandError) -> Step {
        guard unit.depth == 0 else {
            throw CommandError(.denied, "\(unit.depth) nested scratchpad(s) open: MERGE or DISCARD before SAVE")
        }
        let changes = unit.current
        guard !changes.isEmpty else { return .reply(.ok("nothing to save")) }
        return .database { [self] connection, _ in
            switch SaveRunner.save(changes, policy: policy, model: model, connection: connection) {
            case .failure(let error):
                Log.info("save failed (\(who)): \(error.code.rawValue) \(error.message)", session: id)
                return error.reply
            case .success(let saved):
                unit.saved()
                let o = saved.outcome
                let summary = "saved: \(o.inserted) inserted, \(o.updated) updated, \(o.deleted) deleted, \(o.cascaded) cascaded, \(o.nullified) nullified"
                    + (saved.attempts > 1 ? " (\(saved.attempts) attempts)" : "")
                Log.info("\(summary) (\(who))", session: id)
                let lines = o.assigned.map { "#\($0.ref) \($0.entity) \($0.id)" } + o.notes
                return .ok(summary, lines: lines)
            }
        }
    }
}
