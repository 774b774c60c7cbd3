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
        guard include.isEmpty else { throw CommandError(.syntax, "INCLUDE is not supported yet") }
        let storedID: String?
        switch id {
        case .stored(let text): storedID = try self.storedID(text, of: entity)
        case .pending(let ref):
            guard let pending = unit.current.insert(ref), pending.entity == entity.name else {
                throw CommandError(.notFound, "no pending \(entity.name) #\(ref) in this unit of work")
            }
            storedID = nil
        }
        return database(model) { [self] connection in
            try withPendingChanges(model, connection) { ids in
                let key: String
                if let storedID { key = storedID } else if case .pending(let ref) = id, let assigned = ids[ref] { key = assigned } else {
                    throw CommandError(.notFound, "no \(entity.name) \(id)")
                }
                let query = try QueryBuilder.select(FetchRequest(entity: entity.name), model: model, keyFilter: key)
                let result = try connection.query(query.sql, query.parameters)
                guard let row = result.string(0, 0) else { throw CommandError(.notFound, "no \(entity.name) with id \(key)") }
                return .ok("1 record", lines: [row])
            }
        }
    }

    func find(_ request: FetchRequest, model: Model) throws(CommandError) -> Step {
        guard request.include.isEmpty else { throw CommandError(.syntax, "INCLUDE is not supported yet") }
        let query = try QueryBuilder.select(request, model: model)
        return database(model) { [self] connection in
            try withPendingChanges(model, connection) { _ in
                let result = try connection.query(query.sql, query.parameters)
                let lines = (0..<result.rowCount).map { result.string($0, 0) ?? "null" }
                return .ok("\(lines.count) record\(lines.count == 1 ? "" : "s")", lines: lines)
            }
        }
    }

    func count(_ entityName: String, predicate: Predicate?, model: Model) throws(CommandError) -> Step {
        let query = try QueryBuilder.count(entityName, predicate: predicate, model: model)
        return database(model) { [self] connection in
            try withPendingChanges(model, connection) { _ in
                let result = try connection.query(query.sql, query.parameters)
                return .ok(result.string(0, 0) ?? "0")
            }
        }
    }

    func save(_ policy: MergePolicy, model: Model) throws(CommandError) -> Step {
        guard unit.depth == 0 else {
            throw CommandError(.denied, "\(unit.depth) nested scratchpad(s) open: MERGE or DISCARD before SAVE")
        }
        let changes = unit.current
        guard !changes.isEmpty else { return .reply(.ok("nothing to save")) }
        return .database { [self] connection in
            switch SaveRunner.save(changes, policy: policy, model: model, connection: connection) {
            case .failure(let error):
                Log.info("save failed: \(error.code.rawValue) \(error.message)", session: id)
                return error.reply
            case .success(let saved):
                unit.saved()
                let o = saved.outcome
                let summary = "saved: \(o.inserted) inserted, \(o.updated) updated, \(o.deleted) deleted, \(o.cascaded) cascaded, \(o.nullified) nullified"
                    + (saved.attempts > 1 ? " (\(saved.attempts) attempts)" : "")
                Log.info(summary, session: id)
                let lines = o.assigned.map { "#\($0.ref) \($0.entity) \($0.id)" } + o.notes
                return .ok(summary, lines: lines)
            }
        }
    }
}
