/// Which watching sessions get which events of a delivery, decided without I/O; the server
/// does what it says. A watch without WHERE gets the event's lines, rendered once for all.
/// A watch with WHERE needs PostgreSQL: one query (`WatchFilter`) per event, distinct
/// predicate and identity (a predicate's key path may reach a table with policies), however
/// many sessions share it; past `maxChecks` queries, a session is told what it missed instead.
/// Events on entities with row-level security are the ledgers' (`VisibilityLedger`), not here.
public struct WatchFanOut {
    /// A session that watches: its id, whose rights its queries run with, and its watches
    /// (entity → predicate, nil for a watch without WHERE).
    public struct Watcher {
        public var id: Int
        public var identity: Identity
        public var watches: [String: Predicate?]

        public init(id: Int, identity: Identity, watches: [String: Predicate?]) {
            (self.id, self.identity, self.watches) = (id, identity, watches)
        }
    }

    /// A query to run, and the sessions that get the lines it finds.
    public struct Check {
        public var filter: WatchFilter
        public var sessions: [Int]
    }

    /// Per watcher, in the order given: the indices of the events whose lines it gets as they are.
    public private(set) var lines: [[Int]] = []
    /// Per watcher: events it misses (past `maxChecks`).
    public private(set) var missed: [Int] = []
    public private(set) var checks: [Check] = []

    /// `guarded[i]`: event `i` is on an entity with row-level security (left to the ledgers).
    public init(events: [ChangeFeed.Event], guarded: [Bool], model: Model, maxChecks: Int, watchers: [Watcher]) {
        var checkAt: [String: Int] = [:]
        lines.reserveCapacity(watchers.count)
        missed.reserveCapacity(watchers.count)
        for watcher in watchers {
            var mine: [Int] = []
            var dropped = 0
            for (index, event) in events.enumerated() where !guarded[index] {
                guard let watch = watcher.watches[event.entity] else { continue }
                guard let predicate = watch else {
                    mine.append(index)
                    continue
                }
                let key = "\(index)\u{0}\(watcher.identity.tag)\u{0}\(predicate)"
                if let at = checkAt[key] {
                    checks[at].sessions.append(watcher.id)
                    continue
                }
                guard checks.count < maxChecks else {
                    dropped += 1
                    continue
                }
                guard let filter = WatchFilter(event, predicate: predicate, identity: watcher.identity, model: model) else { continue }
                checkAt[key] = checks.count
                checks.append(Check(filter: filter, sessions: [watcher.id]))
            }
            lines.append(mine)
            missed.append(dropped)
        }
    }
}

extension WatchFanOut {
    /// A ledger's share of a delivery (`VisibilityLedger`): the events on one entity under
    /// row-level security, judged for one identity, and who gets what it lets through.
    public struct LedgerBatch {
        public var identity: Identity
        public var entity: String
        public var batch: VisibilityLedger.Batch
    }

    /// One batch per identity and entity that has events, whatever the number of its sessions,
    /// in the order first met; its sessions without WHERE together, the others grouped by
    /// predicate.
    public static func ledgerBatches(events: [ChangeFeed.Event], guarded: [Bool], watchers: [Watcher]) -> [LedgerBatch] {
        // Each entity's guarded events, found once (not once per watcher of it).
        var byEntity: [String: [ChangeFeed.Event]] = [:]
        for (index, event) in events.enumerated() where guarded[index] { byEntity[event.entity, default: []].append(event) }
        var batches: [LedgerBatch] = []
        var at: [String: Int] = [:]
        for watcher in watchers {
            for (entity, watch) in watcher.watches {
                guard let mine = byEntity[entity] else { continue }
                let key = watcher.identity.tag + "\u{0}" + entity
                if at[key] == nil {
                    at[key] = batches.count
                    batches.append(LedgerBatch(identity: watcher.identity, entity: entity,
                                               batch: VisibilityLedger.Batch(events: mine, all: [], filtered: [])))
                }
                let index = at[key]!
                guard let predicate = watch else {
                    batches[index].batch.all.append(watcher.id)
                    continue
                }
                if let group = batches[index].batch.filtered.firstIndex(where: { $0.predicate == predicate }) {
                    batches[index].batch.filtered[group].connections.append(watcher.id)
                } else {
                    batches[index].batch.filtered.append((predicate, [watcher.id]))
                }
            }
        }
        return batches
    }
}
