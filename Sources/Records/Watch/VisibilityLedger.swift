import Foundation

/// The keys a WATCH's identity could see when it began, read in the WATCH's own work.
public struct WatchSeed: Sendable {
    public var keys: Set<RecordKey>
    /// False when there were more than the ledger remembers.
    public var complete: Bool
}

/// WATCH on an entity with row-level security: which committed changes one identity may be
/// told of. One ledger per identity and entity, however many sessions of that identity watch
/// it, so the cost grows with the distinct users watching, not with the watching sessions.
///
/// Inserts and updates are checked by asking PostgreSQL, as the identity, which of the changed
/// keys it sees now: its policies decide. A deleted row can no longer be asked about, so the
/// ledger remembers the keys the identity could see (read when it starts watching, kept up to
/// date by every change it is told of) and reports a delete only of those.
///
/// Work is queued in delivery order and drained by one worker at a time, so a delete is never
/// judged before the insert that came before it. Each drain first asks whether the policies
/// bind the identity at all (a superuser, a BYPASSRLS role, a table's owner without FORCE see
/// every row): when they do not, every change is told as it would be on a table without
/// policies, and no key is looked up (at 9,000 watched SAVEs a second that lookup cost
/// PostgreSQL a third of a millisecond a read for nothing).
public final class VisibilityLedger: @unchecked Sendable {  // `queue`, `scheduled` guarded by `lock`; `known` touched only by the one drainer
    /// One delivery's events on this entity, and who of this identity watches them.
    public struct Batch: Sendable {
        public var events: [ChangeFeed.Event]
        /// Sessions that watch without a WHERE.
        public var all: [Int]
        /// Sessions with a WHERE, grouped by predicate.
        public var filtered: [(predicate: Predicate, connections: [Int])]

        public init(events: [ChangeFeed.Event], all: [Int], filtered: [(predicate: Predicate, connections: [Int])]) {
            self.events = events
            self.all = all
            self.filtered = filtered
        }
    }

    /// Lines for some sessions; `unchecked`: deletes they may have been entitled to that the
    /// ledger could not judge (more visible records than it remembers).
    public struct Output: Sendable, Equatable {
        public var connections: [Int]
        public var lines: [String]
        public var unchecked = 0
    }

    private enum Item {
        case seed
        case batch(Batch)
    }

    /// Keys remembered per identity and entity; past it, deletes of records not changed since
    /// the WATCH began cannot be judged and are counted as unchecked.
    public static let rememberedKeys = 100_000

    public let identity: Identity
    public let entityName: String
    private let lock = NSLock()
    private var queue: [Item] = [.seed]
    private var scheduled = false
    private var known: Set<RecordKey> = []
    private var complete = true

    /// A new ledger. `seed`: what the identity saw, read by its WATCH before the reply (so a
    /// delete right after the reply is judged against it); without one, reading it is the
    /// ledger's first work.
    public init(identity: Identity, entity: String, seed: WatchSeed? = nil) {
        self.identity = identity
        self.entityName = entity
        if let seed {
            queue = []
            known = seed.keys
            complete = seed.complete
        }
    }

    /// Queues a delivery's events; true when the caller must start a drain.
    public func enqueue(_ batch: Batch) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        queue.append(.batch(batch))
        return schedule()
    }

    /// True when a drain must start (a new ledger has its seed queued).
    public func needsDrain() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        return !queue.isEmpty && schedule()
    }

    private func schedule() -> Bool {
        guard !scheduled else { return false }
        scheduled = true
        return true
    }

    /// No worker could run the drain (PostgreSQL unavailable): the queued events are dropped;
    /// the next delivery starts again.
    public func abandon() {
        lock.lock()
        defer { lock.unlock() }
        queue.removeAll { if case .batch = $0 { true } else { false } }
        scheduled = false
    }

    /// Runs the queued work in order until none is left. `query` runs a statement as this
    /// ledger's identity and returns its rows' columns.
    public func drain(model: Model, query: (String, [String?]) throws -> [[String]], emit: (Output) -> Void) {
        while true {
            lock.lock()
            if queue.isEmpty {
                scheduled = false
                lock.unlock()
                return
            }
            let items = queue
            queue.removeAll()
            lock.unlock()
            guard let entity = model.entity(named: entityName) else { continue }
            let bound = items.contains { if case .batch = $0 { true } else { false } } ? policiesBind(entity, model: model, query: query) : true
            for item in items {
                switch item {
                case .seed: seed(entity, model: model, query: query)
                case .batch(let batch):
                    for event in batch.events {
                        judge(event, batch: batch, entity: entity, bound: bound, model: model, query: query).forEach(emit)
                    }
                }
            }
        }
    }

    /// Asked as the identity, once a drain (a role's rights can change while it watches);
    /// bound unless PostgreSQL says otherwise.
    private func policiesBind(_ entity: Entity, model: Model, query: (String, [String?]) throws -> [[String]]) -> Bool {
        let ask = QueryBuilder.policiesBind(entity, model: model)
        return (try? query(ask.sql, ask.parameters))?.first?.first != "false"
    }

    /// Remembers a key the identity was told of, up to `rememberedKeys`: past it, deletes of
    /// keys it forgot are counted as unchecked, as for a seed that was cut short.
    private func remember(_ key: RecordKey) {
        if known.count < Self.rememberedKeys { known.insert(key) } else if !known.contains(key) { complete = false }
    }

    private func keys(_ rows: [[String]], _ entity: Entity) -> [RecordKey] {
        rows.map { RecordKey(entity: entity.name, values: $0) }
    }

    private func seed(_ entity: Entity, model: Model, query: (String, [String?]) throws -> [[String]]) {
        let read = QueryBuilder.visible(entity, limit: Self.rememberedKeys + 1, model: model)
        do {
            let visible = keys(try query(read.sql, read.parameters), entity)
            complete = visible.count <= Self.rememberedKeys
            known = Set(visible.prefix(Self.rememberedKeys))
        } catch {
            complete = false
            Log.warning("WATCH \(entityName) for \(identity.user.isEmpty ? "sessions without a user" : identity.user): visible records not read (\(error)); deletes of records not changed since are not reported")
        }
    }

    /// What the sessions of this identity are told of one event.
    private func judge(_ event: ChangeFeed.Event, batch: Batch, entity: Entity, bound: Bool, model: Model,
                       query: (String, [String?]) throws -> [[String]]) -> [Output] {
        let changed = event.ids.compactMap { ChangeFeed.recordKey($0, of: entity) }
        var outputs: [Output] = []
        let told: [RecordKey]
        var unchecked = 0
        if event.operation == .deleted {
            told = bound ? changed.filter { known.contains($0) } : changed
            if !complete && bound { unchecked = changed.count - told.count }
            for key in changed { known.remove(key) }
        } else if !bound {
            // Every row is visible; the keys are still remembered, should the policies bind later.
            told = changed
            for key in changed { remember(key) }
        } else {
            let read = QueryBuilder.visible(entity, keys: changed, model: model)
            do {
                let visible = Set(keys(try query(read.sql, read.parameters), entity))
                told = changed.filter { visible.contains($0) }
                // A key told of stays known when a later change hides it: the row may be gone
                // already (deleted in a delivery not yet read), and its delete must then be
                // told, or the session would keep a record that no longer exists.
                for key in changed where visible.contains(key) { remember(key) }
            } catch {
                Log.warning("WATCH \(entityName): \(changed.count) \(event.operation.rawValue) event(s) not checked for \(identity.user): \(error)")
                return [Output(connections: batch.all + batch.filtered.flatMap(\.connections), lines: [], unchecked: changed.count)]
            }
        }
        // A deleted row the identity could see: among the keys it is told of (never a copy of
        // everything it sees, which a change would then copy whole).
        let couldSee = event.operation == .deleted ? Set(told) : []
        if !batch.all.isEmpty && (!told.isEmpty || unchecked > 0) {
            outputs.append(Output(connections: batch.all, lines: WatchEvents.lines(entity, event.operation, told), unchecked: unchecked))
        }
        for (predicate, connections) in batch.filtered {
            // The policies filter inserts and updates as the query reads the table; a deleted
            // row's old values are matched, then kept only if the identity could see it.
            guard let match = WatchEvents.matching(event, predicate, model: model) else { continue }
            do {
                var matched = keys(try query(match.sql, match.parameters), entity)
                if event.operation == .deleted { matched = matched.filter { couldSee.contains($0) } }
                if !matched.isEmpty || unchecked > 0 {
                    outputs.append(Output(connections: connections, lines: WatchEvents.lines(entity, event.operation, matched), unchecked: unchecked))
                }
            } catch {
                outputs.append(Output(connections: connections, lines: [], unchecked: changed.count))
            }
        }
        return outputs
    }
}
