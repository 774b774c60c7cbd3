#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Postgres
import Records
import RecordsProtocol

/// WATCH: committed changes fanned out to the sessions that watch them.
extension Server {
    /// A batch of committed changes, each event's lines rendered once (off the loop, by the
    /// thread that read them), for every session that watches without a WHERE.
    struct LedgerKey: Hashable {
        var identity: Identity
        var entity: String
    }

    struct Delivery: Sendable {
        var events: [ChangeFeed.Event]
        var lines: [PushLines]
    }

    /// Off the loop: renders the lines of `events` once, then hands them to the loop.
    static func render(_ events: [ChangeFeed.Event], model: Model) -> Delivery {
        Delivery(events: events, lines: events.map { event in
            guard let entity = model.entity(named: event.entity) else { return PushLines([]) }
            return PushLines(WatchEvents.lines(entity, event.operation, event.ids.compactMap { ChangeFeed.recordKey($0, of: entity) }))
        })
    }

    /// Sessions a turn of the loop hands events to: a fan-out to thousands of sessions is
    /// spread over turns, so the sessions' own commands are served between them.
    static let deliveriesPerTurn = 512

    /// Queries one delivery runs for WATCH ... WHERE (events times distinct predicates): a
    /// change of 200,000 rows watched through 200 predicates asked 40,000 of them.
    static let maxFilterChecks = 1_000

    /// On the loop: committed changes for the sessions that WATCH them, `deliveriesPerTurn`
    /// sessions a turn, as `WatchFanOut` decides; its WHERE queries run on the pool.
    func deliver(_ delivery: Delivery, from start: Int = 0, watching: [ClientConnection]? = nil) {
        // Once a delivery, the watching sessions, each with its rights as the users table says
        // now: a removed user's session is told and hears nothing more.
        let sessions = watching ?? connections.values.filter { connection in
            guard !connection.session.watches.isEmpty else { return false }
            guard let signedOut = connection.session.followUsersTable() else { return true }
            connection.push(Notice.signedOut(signedOut.statusMessage).text)
            if !connection.busy { connection.service() }
            return false
        }
        let end = min(sessions.count, start + Self.deliveriesPerTurn)
        let model = context.model
        let guarded = delivery.events.map { model.entity(named: $0.entity)?.hasRowSecurity == true }
        if start == 0 && guarded.contains(true) { deliverGuarded(delivery.events, guarded: guarded, sessions: sessions) }
        let turn = sessions[start..<end].filter { !$0.closed }
        let plan = WatchFanOut(events: delivery.events, guarded: guarded, model: model, maxChecks: Self.maxFilterChecks,
                               watchers: turn.map(\.watcher))
        for (position, connection) in turn.enumerated() {
            for index in plan.lines[position] { connection.events.append(delivery.lines[index]) }  // shared, rendered once
            connection.events.dropped += plan.missed[position]
            if (!connection.events.isEmpty || connection.events.dropped > 0) && !connection.busy { connection.service() }
        }
        if end < sessions.count {
            loop.nextTurn { [self] in deliver(delivery, from: end, watching: sessions) }
        }
        for check in plan.checks {
            let (filter, connections) = (check.filter, check.sessions)
            pool.submit { [inbox] result in
                let lines: [String]
                do {
                    lines = try filter.matchingLines(on: try result.get().connection, model: model)
                } catch {
                    return Log.warning("WATCH \(filter.event.entity) WHERE: \(filter.event.ids.count) \(filter.event.operation.rawValue) event(s) not checked for \(connections.count) session(s): \(error)")
                }
                guard !lines.isEmpty else { return }
                inbox.post(.filtered(connections: connections, lines: PushLines(lines)))
            }
        }
    }

    /// Events on entities with row-level security go through the ledger of each identity that
    /// watches them, one batch each as `WatchFanOut.ledgerBatches` makes them, judged in order
    /// on a pool worker that runs as the identity.
    func deliverGuarded(_ events: [ChangeFeed.Event], guarded: [Bool], sessions: [ClientConnection]) {
        let model = context.model
        let open = sessions.filter { !$0.closed }
        for connection in open {
            for entity in connection.session.watches.keys where model.entity(named: entity)?.hasRowSecurity == true {
                join(connection, LedgerKey(identity: connection.session.identity, entity: entity))
            }
        }
        let batches = WatchFanOut.ledgerBatches(events: events, guarded: guarded, watchers: open.map(\.watcher))
        for work in batches {
            let ledger = ledgers[LedgerKey(identity: work.identity, entity: work.entity)]!
            if ledger.enqueue(work.batch) { drain(ledger) }
        }
        // Ledgers no session uses any more are dropped: a later WATCH reads anew what it sees.
        var used = Set<LedgerKey>()
        for connection in sessions where !connection.closed {
            for entity in connection.session.watches.keys { used.insert(LedgerKey(identity: connection.session.identity, entity: entity)) }
        }
        ledgers = ledgers.filter { used.contains($0.key) }
        ledgerUsers = ledgerUsers.filter { used.contains($0.key) }
    }

    /// A session that watches an entity with row-level security has its identity's ledger
    /// from the WATCH's reply on: deletes after it are judged against what it could see then.
    func startLedgers(for connection: ClientConnection) {
        let model = context.model
        for entity in connection.session.watches.keys where model.entity(named: entity)?.hasRowSecurity == true {
            let seed = connection.session.takeWatchSeed(entity)
            let ledger = join(connection, LedgerKey(identity: connection.session.identity, entity: entity), seed: seed)
            if ledger.needsDrain() { drain(ledger) }
        }
    }

    /// The ledger `connection` uses for `key`. A session that joins a ledger none of whose
    /// sessions still watches gets a new one: what its user sees is read again, never taken
    /// from a ledger that heard nothing while no one watched.
    @discardableResult
    func join(_ connection: ClientConnection, _ key: LedgerKey, seed: WatchSeed? = nil) -> VisibilityLedger {
        var users = ledgerUsers[key] ?? []
        if !users.contains(connection.id) {
            users = users.filter { id in
                guard let other = byID[id], !other.closed else { return false }
                return other.session.watches[key.entity] != nil && other.session.identity == key.identity
            }
            if users.isEmpty { ledgers[key] = nil }
            users.insert(connection.id)
            ledgerUsers[key] = users
        }
        if let ledger = ledgers[key] { return ledger }
        let ledger = VisibilityLedger(identity: key.identity, entity: key.entity, seed: seed)
        ledgers[key] = ledger
        return ledger
    }

    /// On a pool worker, as the ledger's identity, until its queue is empty.
    func drain(_ ledger: VisibilityLedger) {
        let model = context.model
        pool.submit { [inbox] result in
            guard case .success(let lease) = result, (try? lease.connection.assume(ledger.identity)) != nil else {
                Log.warning("WATCH \(ledger.entityName): PostgreSQL is unavailable; events for \(ledger.identity.user) dropped")
                return ledger.abandon()
            }
            ledger.drain(on: lease.connection, model: model, emit: { output in
                inbox.post(.filtered(connections: output.connections, lines: PushLines(output.lines), unchecked: output.unchecked))
            })
        }
    }

    /// Pushes queued events while the output has room; a session that falls behind has its
    /// oldest events dropped and is told how many.
    func pushEvents(_ connection: ClientConnection) {
        if connection.events.dropped > 0 {
            context.metrics.add(.watchEventsDropped, connection.events.dropped)
            connection.push(Notice.overflow(dropped: connection.events.dropped).text)
            connection.events.dropped = 0
        }
        var pushed = 0
        while connection.pendingOutput < configuration.outputHighWater, let line = connection.events.pop() {
            connection.push(bytes: line)
            pushed += 1
        }
        context.metrics.add(.watchEventsQueued, pushed)
    }
}

extension ClientConnection {
    /// What WatchFanOut needs of the session: who it is and what it watches.
    var watcher: WatchFanOut.Watcher {
        WatchFanOut.Watcher(id: id, identity: session.identity, watches: session.watches)
    }
}
