import Foundation
import Records

/// SAVEs waiting for a pool worker to run them in groups (`DatabaseWork.runSaves`): the loop
/// adds, workers take. At most one job waits in the pool for them at a time; while it waits,
/// more SAVEs gather behind it, so a busy server groups many and an idle one runs each at
/// once, alone, as before.
final class SaveQueue: @unchecked Sendable {  // all state guarded by `lock`
    struct Entry: Sendable {
        var connection: Int
        var work: DatabaseWork
        var key: SaveGroupKey
        /// The session's, for a CANCEL while the group runs, and this SAVE's generation in it.
        var cancel: CancelBox
        var generation: Int
    }

    private let lock = NSLock()
    private var waiting: [Entry] = []
    private var jobWaiting = false

    /// On the loop: queues `entry`; true when a job must be submitted to take it.
    func add(_ entry: Entry) -> Bool {
        lock.lock()
        defer { lock.unlock() }
        waiting.append(entry)
        if jobWaiting { return false }
        jobWaiting = true
        return true
    }

    /// On a worker, as its job starts: the first waiting SAVE and up to `limit - 1` more of the
    /// same group key, in the order they came; `more` when others still wait and no job does.
    func take(limit: Int) -> (entries: [Entry], more: Bool) {
        lock.lock()
        defer { lock.unlock() }
        jobWaiting = false
        guard let key = waiting.first?.key else { return ([], false) }
        var taken: [Entry] = []
        var kept: [Entry] = []
        for entry in waiting {
            if taken.count < limit && entry.key == key { taken.append(entry) } else { kept.append(entry) }
        }
        waiting = kept
        if !waiting.isEmpty { jobWaiting = true }
        return (taken, !waiting.isEmpty)
    }
}
