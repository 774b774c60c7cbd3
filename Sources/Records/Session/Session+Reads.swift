import Foundation
import Postgres

// MARK: - GET, FIND, COUNT, EXPLAIN

extension Session {
    func get(_ entityName: String, address: RecordAddress, include: [String], includeOrder: [String: IncludeOrder] = [:],
             model: Model) throws(CommandError) -> Step {
        let entity = try entity(entityName, model)
        let target = try target(address, in: entity, model: model)
        let request = { var r = FetchRequest(entity: entity.name, include: include); r.includeOrder = includeOrder; return r }()
        // The filter's columns, its values where the loop knows them (a pending #ref's key is
        // known only once the view applies the unit), and what a miss answers (worded only for
        // a miss).
        let columns: [String], known: [String]?, notFound: @Sendable () -> CommandError, pending: String
        switch target {
        case .stored(let key):
            (columns, known, pending) = (entity.keyColumns, key.values, "")
            notFound = { CommandError(.notFound, entity.missing(key)) }
        case .unique(_, let given):
            (columns, known, pending) = (given.map(\.column), given.map(\.value), "")
            notFound = { CommandError(.notFound, "no \(entity.name) with " + given.map { "\(entity.label($0.column))=\(JSON.quote($0.value))" }.joined(separator: " ")) }
        case .pending(let ref):
            (columns, known, pending) = (entity.keyColumns, nil, ref)
            notFound = { CommandError(.notFound, "no \(entity.name) #\(ref)") }
        }
        let template = try model.selects.get(request, model: model, columns: columns)  // names checked before any I/O
        let snapshot = self.snapshot
        /// The reply to the row found (or not), with what the session takes from it.
        @Sendable func answer(_ result: QueryResult, _ select: QueryBuilder.Select, _ view: ViewPlan.View) -> WorkResult {
            guard result.rowCount == 1 else { return WorkResult(reply: notFound().reply) }
            let line = select.encoder.line(result, row: 0)
            let version = Self.version(result, row: 0, select: select, entity: entity, view: view)
            let allocated = view.allocated
            return WorkResult(reply: .ok("1 record" + view.note, lines: [line])) { session in
                session.unit.assign(allocated)
                if let version { session.unit.recordReads([version]) }
            }
        }
        // Nothing pending to apply first: one statement, which may share a round trip with
        // the reads pipelined behind it.
        let bound = known.map { template.binding($0) }
        let read = snapshot.changes.isEmpty ? bound.map { select in
            PipelinedRead(sql: select.sql, parameters: select.parameters) { answer($0, select, ViewPlan.View()) }
        } : nil
        return database(model, read: read) { context in
            try context.withView(snapshot, model: model) { view -> WorkResult in
                let select: QueryBuilder.Select
                if let bound {
                    select = bound
                } else {
                    guard let key = view.keys[pending] else {
                        let reason = view.excluded.first { $0.change == .insert(pending) }?.reason ?? "it cannot be applied yet"
                        throw CommandError(.notFound, "#\(pending) is pending but cannot be shown yet: \(reason)")
                    }
                    select = template.binding(entity.keyColumns.map { key.values[$0] ?? "" })
                }
                let found = try context.retryingOnce { try context.connection.queryPrepared(select.sql, select.parameters) }
                return answer(found, select, view)
            }.0
        }
    }

    /// The record's version for the unit's read versions, from the columns `versions: .xmin`
    /// added; nil for a row the view itself wrote (its `xmin` is the view's transaction).
    static func version(_ result: QueryResult, row: Int, select: QueryBuilder.Select, entity: Entity, view: ViewPlan.View) -> (RecordKey, String)? {
        version(select: select, entity: entity, view: view) { result.string(row, $0) }
    }

    static func version(_ row: CopyRow, select: QueryBuilder.Select, entity: Entity, view: ViewPlan.View) -> (RecordKey, String)? {
        version(select: select, entity: entity, view: view) { row.string($0) }
    }

    private static func version(select: QueryBuilder.Select, entity: Entity, view: ViewPlan.View,
                                column: (Int) -> String?) -> (RecordKey, String)? {
        guard let columns = select.versionColumns, let xminColumn = columns.xmin, view.tracksVersions,
              let xmin = column(xminColumn), xmin != view.transactionID else { return nil }
        return (entity.recordKey(columns.key.map(column)), xmin)
    }

    /// A FIND that sent `count` records stopped before its end: the client read nothing for
    /// `stall` seconds, the server is stopping, or it ran past the bulk timeout.
    static func findStopped(count: Int, expired: Bool, sink: LineSink, stall: Int, bulkTimeout: Int) throws(CommandError) {
        if sink.stalled {
            throw CommandError(.limit, "the client read nothing for \(stall) s: the FIND stopped after \(count) record(s), to free its connection")
        }
        if sink.stopping {
            throw CommandError(.unavailable, "the server is stopping: the FIND stopped after \(count) record(s); ask again on another server (after RESUME when a hand-off token follows)")
        }
        if expired { throw ranPastBulkTimeout("FIND", bulkTimeout, count) }
    }

    /// Rows stream to the client as PostgreSQL produces them (`COPY (SELECT ...) TO STDOUT`),
    /// in batches, waiting while the client is slow to read: memory stays flat whatever the size.
    func find(_ request: FetchRequest, model: Model) throws(CommandError) -> Step {
        let entity = try entity(request.entity, model)
        // The cursor as the query reads it, once the keys that sealed it for this user open it.
        let cursors = context.cursors, user = user?.name
        let request = try Cursor.opened(request, by: cursors, user: user)
        let rowVersions = try QueryBuilder.select(request, model: model, versions: .xmin)
        let snapshot = self.snapshot
        let stall = context.work.replyStall, bulkTimeout = context.work.bulkTimeout
        // A FIND of a few pages holds its connection briefly; one of everything streams.
        let streams = (request.limit ?? Int.max) > 1000
        // One that streams, with no pending changes to show, may take its snapshot as every
        // record's version instead of selecting each row's (SnapshotVersion).
        let snapshotVersions = streams && snapshot.changes.isEmpty && rowVersions.versionColumns != nil
            ? try QueryBuilder.select(request, model: model, versions: .keys) : nil
        // Such a read of a whole table may be read in two halves at once (SplitRead): the
        // same statements, each limited to a range of the table's blocks.
        let halves = snapshotVersions != nil ? rowVersions.wholeTable.map { _ in
            (rows: try? QueryBuilder.select(request, model: model, versions: .xmin, splittable: true),
             keys: try? QueryBuilder.select(request, model: model, versions: .keys, splittable: true))
        } : nil
        return database(model, hold: streams ? .streams : .statements) { context in
            let ((message, versions, count), view) = try context.withView(snapshot, model: model) { view -> (String, [(RecordKey, String)], Int) in
                var rows = FindRows(rowVersions, entity: entity, view: view, limit: request.limit)
                defer { rows.deallocate() }
                // Only the snapshot's statement may read a table whole: the other selects each row's xmin.
                var probes: [(sql: String, parameters: [String?])] = []
                if snapshotVersions?.storedColumns != nil, let whole = snapshotVersions?.readsWholeQuery { probes.append(whole) }
                let wholeProbe = probes.isEmpty ? nil : 0
                let split = halves != nil && context.lend != nil ? SplitRead() : nil
                // However the read ends, a helper not yet begun never begins, and one waiting
                // to hand over a batch stops.
                defer { split?.stop() }
                if split != nil, let table = rowVersions.wholeTable { probes += SplitRead.probes(table: table) }
                let deadline = DispatchTime.now() + .milliseconds(bulkTimeout)
                var expired = try Self.stream(context: context, snapshot: snapshotVersions != nil, probes: probes, split: split,
                                              until: deadline) { taken, probed, connection throws(PostgresError) in
                    rows.stamped = nil  // chosen again when a dead connection's statement is run anew
                    var chosen = rowVersions, half = halves?.rows
                    if let taken, let keysOnly = snapshotVersions, let key = keysOnly.versionColumns?.key, let version = SnapshotVersion.stamp(taken) {
                        rows.stamped = (version, key)
                        (chosen, half) = (keysOnly, halves?.keys)
                    }
                    if let split, let half, let table = rowVersions.wholeTable, let plan = SplitRead.Plan(probed.suffix(2)) {
                        let first = try half.copyOut(blocks: 0..<plan.middle, literal: connection.escapeLiteral)
                        let second = try half.copyOut(blocks: plan.middle..<QueryBuilder.Select.endBlock, literal: connection.escapeLiteral)
                        let (stamped, settings, identity) = (rows.stamped, context.settings, context.identity)
                        let lent = split.lend(context) { lease in
                            var helper = FindRows(half, entity: entity, view: view, limit: nil)
                            defer { helper.deallocate() }
                            helper.stamped = stamped
                            split.readSecondHalf(second, table: table, exported: plan.exported, rows: &helper, lease: lease, settings: settings, identity: identity)
                        }
                        if lent { return [first, second] }
                    }
                    return [try chosen.copyOut(readsWhole: wholeProbe.map { probed[$0] == "t" } ?? false, literal: connection.escapeLiteral)]
                } encode: { line, batch in
                    rows.take(line, into: &batch)
                }
                if let split {
                    // Who reads the second half is settled once the leader's stream is over.
                    if split.asked { context.settings.metrics?.add(split.helped ? .readsSplit : .readsWhole) }
                    if !expired { rows.versions += try split.drain(to: context.sink, after: rows.versions.count, until: deadline) }
                    expired = expired || split.expired  // passing the helper's batches on, too
                }
                let count = rows.count + (split?.forwarded ?? 0)
                try Self.findStopped(count: count, expired: expired, sink: context.sink, stall: stall, bulkTimeout: bulkTimeout)
                // LIMIT 0 asks for no page: there is no position to go on from. A keyset cursor
                // where the query has one; DISTINCT pages by OFFSET.
                let next = !rows.more || count == 0 ? "" : rowVersions.cursorColumns > 0
                    ? "; next page: AFTER " + Cursor.sealed(rows.lastKeys, fingerprint: rowVersions.fingerprint, by: cursors, user: user)
                    : "; next page: OFFSET \((request.offset ?? 0) + count)"
                return ("\(count) record\(count == 1 ? "" : "s")" + next, rows.versions, count)
            }
            let allocated = view.allocated
            return WorkResult(reply: .ok(message + view.note), streamedRows: count) { session in
                session.unit.assign(allocated)
                session.unit.recordReads(versions)
            }
        }
    }

    /// Runs the statements `statements` gives once the snapshot is known as one stream of rows
    /// (`Connection.streamCopy`, allowed the bulk timeout: it is one statement however long
    /// the client takes to read), asking `probes` first in the same round trip (their values
    /// in order), letting `encode` write each row's line into the batch (false: stop), and
    /// hands the batch to the sink as it fills. With `split`, the second statement is the
    /// second half of a read another connection may be reading (`SplitRead`): its batches
    /// are passed on between this one's. COPY takes no parameters: the values are inlined as
    /// literals quoted by libpq, as EXPORT's are. A connection found dead before anything was
    /// sent (and before another connection was asked to help) is replaced and the query run again.
    ///
    /// The stream stops at the first batch past `deadline` (true is returned): PostgreSQL's
    /// statement timeout, five seconds later, cannot be the limit, because a client that reads
    /// slowly but steadily holds its error behind the rows already in the sockets for as long
    /// as it takes to read them.
    static func stream(context: WorkContext, snapshot: Bool, probes: [(sql: String, parameters: [String?])], split: SplitRead?,
                       until deadline: DispatchTime,
                       statements: (_ snapshot: String?, _ probed: [String?], Connection) throws(PostgresError) -> [String],
                       encode: (UnsafeRawBufferPointer, inout StreamBatch) -> Bool) throws -> Bool {
        var batch = StreamBatch(to: context.sink)
        var sent = false
        var expired = false
        for attempt in 0..<2 {
            let connection = context.connection
            do throws(PostgresError) {
                // Closures written in place, not local functions: the captured variables are
                // then checked for exclusive access at compile time, not three times a row.
                let asked = try probes.map { probe throws(PostgresError) in try SQL.inlining(probe.sql, probe.parameters, literal: connection.escapeLiteral) }
                try connection.streamCopy(timeout: context.settings.bulkTimeout + Self.bulkTimeoutGrace, silence: context.settings.readTimeout, snapshot: snapshot,
                                          probes: asked) { taken, probed throws(PostgresError) in
                    try statements(taken, probed, connection)
                } next: { _ in
                    split?.leaderTakesSecondHalf() ?? true
                } rows: { line in
                    sent = true
                    guard encode(line, &batch) else { return false }
                    guard batch.sendIfFull() else {
                        split?.stop()  // the client left or stalled: the helper stops too
                        return false
                    }
                    guard batch.count == 0 else { return true }
                    // Right after a batch went: the clock, and the helper's waiting batches.
                    if DispatchTime.now() >= deadline {
                        expired = true
                        split?.stop()
                        return false
                    }
                    return split?.forward(to: context.sink, until: deadline) ?? true
                }
                break
            } catch {
                guard attempt == 0, error.kind == .connection, !sent, split?.lent != true, !connection.inTransaction else {
                    split?.stop()
                    throw error
                }
                try context.reconnect()
            }
        }
        batch.finish()
        return expired
    }

    /// PostgreSQL's statement timeout for a stream is this much (milliseconds) past the
    /// stream's own deadline, which decides.
    static let bulkTimeoutGrace = 5000

    /// A FIND or EXPORT stopped at its deadline, `milliseconds` after it began.
    static func ranPastBulkTimeout(_ verb: String, _ milliseconds: Int, _ count: Int) -> CommandError {
        CommandError(.limit, "the \(verb) ran past its time limit (--bulk-timeout, \(milliseconds / 1000) s): it stopped after \(count) record(s), to free its connection")
    }

    func count(_ entityName: String, predicate: Predicate?, estimate: Bool, model: Model) throws(CommandError) -> Step {
        let query = try QueryBuilder.count(entityName, predicate: predicate, model: model)
        if estimate {
            try statisticsAllowed(entityName, model: model, verb: "COUNT ESTIMATE")
            // The planner's row estimate for the same filter: no rows are read.
            let rows = try QueryBuilder.rows(entityName, predicate: predicate, model: model)
            let sql = "EXPLAIN (FORMAT JSON) SELECT 1" + rows.body
            let checksPolicies = role != .admin
            return database(model) { context in
                let plan = try context.retryingOnce { try context.connection.query(sql, rows.parameters).string(0, 0) ?? "" }
                if checksPolicies { try Self.refuseGuarded(plan, model: model, verb: "COUNT ESTIMATE") }
                guard let rows = Self.planRows(plan) else { throw CommandError(.internal, "no estimate in the plan") }
                return WorkResult(reply: .ok("\(rows) estimated"))
            }
        }
        let snapshot = self.snapshot
        return database(model) { context in
            let (count, view) = try context.withView(snapshot, model: model) { _ in
                try context.retryingOnce { try context.connection.queryPrepared(query.sql, query.parameters).string(0, 0) ?? "0" }
            }
            let allocated = view.allocated
            return WorkResult(reply: .ok(count + view.note)) { session in session.unit.assign(allocated) }
        }
    }

    /// AGGREGATE: one statement, run in the view of the unit's pending changes like every
    /// read; a group's object a line.
    func aggregate(_ request: AggregateRequest, model: Model) throws(CommandError) -> Step {
        let query = try QueryBuilder.aggregate(request, model: model)
        let snapshot = self.snapshot
        return database(model) { context in
            let (lines, view) = try context.withView(snapshot, model: model) { _ in
                try context.retryingOnce {
                    let result = try context.connection.query(query.sql, query.parameters)
                    return (0..<result.rowCount).map { JSON.compact(result.string($0, 0) ?? "{}") }
                }
            }
            let allocated = view.allocated
            let message = "\(lines.count) group\(lines.count == 1 ? "" : "s")"
            return WorkResult(reply: .ok(message + view.note, lines: lines)) { session in session.unit.assign(allocated) }
        }
    }

    /// The top node's "Plan Rows" in `EXPLAIN (FORMAT JSON)`'s output.
    static func planRows(_ json: String) -> Int? {
        guard let data = json.data(using: .utf8),
              let plans = (try? JSONSerialization.jsonObject(with: data)) as? [[String: Any]],
              let plan = plans.first?["Plan"] as? [String: Any] else { return nil }
        return (plan["Plan Rows"] as? NSNumber)?.intValue
    }

    /// The planner's statistics count every user's records: on a table with row-level
    /// security only an admin may see estimates drawn from them (COUNT ESTIMATE, EXPLAIN).
    func statisticsAllowed(_ entityName: String, model: Model, verb: String) throws(CommandError) {
        let entity = try entity(entityName, model)
        guard entity.hasRowSecurity, role != .admin else { return }
        throw CommandError(.forbidden, "\(verb) is refused on \(entity.name): it has row-level security, and the planner's statistics count every user's records; use COUNT")
    }

    /// A plan that reads a table with row-level security (through a key path, a subquery)
    /// would show statistics over every user's rows: refused, naming the table.
    static func refuseGuarded(_ json: String, model: Model, verb: String) throws(CommandError) {
        func relations(_ node: Any) -> [String] {
            if let list = node as? [Any] { return list.flatMap(relations) }
            guard let object = node as? [String: Any] else { return [] }
            let own = (object["Relation Name"] as? String).map { [$0] } ?? []
            return own + object.values.flatMap(relations)
        }
        guard let data = json.data(using: .utf8), let parsed = try? JSONSerialization.jsonObject(with: data) else { return }
        let read = Set(relations(parsed))
        guard let guarded = model.entities.first(where: { $0.hasRowSecurity && read.contains($0.name) }) else { return }
        throw CommandError(.forbidden, "\(verb) is refused: it reads \(guarded.name), which has row-level security, and the planner's statistics count every user's records; use COUNT")
    }

    func explain(_ request: FetchRequest, model: Model) throws(CommandError) -> Step {
        let sql: String
        let parameters: [String?]
        if request.limit == 0 && request.order.isEmpty && request.include.isEmpty && request.select.isEmpty {
            (sql, parameters) = try QueryBuilder.count(request.entity, predicate: request.predicate, model: model)
        } else {
            let select = try QueryBuilder.select(request, model: model)
            (sql, parameters) = (select.sql, select.parameters)
        }
        return try explain(request.entity, sql: sql, parameters: parameters, model: model)
    }

    /// The SQL a read runs, its parameters, and PostgreSQL's plan for it.
    func explain(_ entityName: String, sql: String, parameters: [String?], model: Model) throws(CommandError) -> Step {
        try statisticsAllowed(entityName, model: model, verb: "EXPLAIN")
        let checksPolicies = role != .admin && model.entities.contains(where: \.hasRowSecurity)
        let json = jsonReplies
        return database(model) { context in
            if checksPolicies {
                let json = try context.retryingOnce { try context.connection.query("EXPLAIN (FORMAT JSON) " + sql, parameters).string(0, 0) ?? "" }
                try Self.refuseGuarded(json, model: model, verb: "EXPLAIN")
            }
            let plan = try context.retryingOnce { try context.connection.query("EXPLAIN " + sql, parameters) }
            let shown = "[" + parameters.map { $0.map(JSON.quote) ?? "null" }.joined(separator: ",") + "]"
            let steps = (0..<plan.rowCount).map { plan.string($0, 0) ?? "" }
            if json {
                let object = JSON.Value.object([("sql", .string(sql)), ("parameters", .array(parameters.map(JSON.Value.optional))),
                                                ("plan", .array(steps.map(JSON.Value.string)))])
                return WorkResult(reply: .ok("plan", lines: [object.text]))
            }
            return WorkResult(reply: .ok("plan", lines: ["sql: " + sql, "parameters: " + shown] + steps))
        }
    }
}

