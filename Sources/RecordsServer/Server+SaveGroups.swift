import Foundation
import Postgres
import Records

/// Group commit: SAVEs of different sessions run as one transaction when they queue for the
/// pool together (`SaveQueue`, `DatabaseWork.runSaves`).
extension Server {
    /// Queues a batch that is one SAVE, with no session state to write ahead, from a client
    /// whose jobs give their connection back promptly or that has had none yet (each standing
    /// queues apart, and its groups are scheduled as its jobs are); false when it must run as
    /// a job of its own.
    func queueSave(_ connection: ClientConnection, _ works: [BatchItem]) -> Bool {
        guard works.count == 1, case .work(let work) = works[0], let key = work.saveGroupKey, !configuration.durableUnits else { return false }
        let standing = connection.poolUse.standing()
        guard let queue = saveQueues[standing] else { return false }
        connection.machine.startedDatabase()
        context.metrics.add(.savesQueued, 1)
        let generation = connection.cancelBox.submitted()
        if queue.add(SaveQueue.Entry(connection: connection.id, work: work, key: key, cancel: connection.cancelBox, generation: generation)) {
            Self.submitSaveGroup(standing, pool: pool, queue: queue, inbox: inbox, settings: context.work, maxReplyBytes: configuration.maxReplyBytes)
        }
        return true
    }

    /// A pool job that takes the SAVEs waiting (one group key) and answers each session as
    /// its own job would; from the loop, or from a worker when more still wait.
    static func submitSaveGroup(_ standing: PoolStanding, pool: ConnectionPool, queue: SaveQueue, inbox: LoopInbox<ServerMessage>,
                                settings: WorkSettings, maxReplyBytes: Int) {
        pool.submit(standing) { database in
            let (entries, more) = queue.take(limit: DatabaseWork.savesInAGroup)
            if more { submitSaveGroup(standing, pool: pool, queue: queue, inbox: inbox, settings: settings, maxReplyBytes: maxReplyBytes) }
            guard !entries.isEmpty else { return }
            let started = DispatchTime.now().uptimeNanoseconds
            defer { for entry in entries { entry.cancel.finished(entry.generation) } }
            var results: [WorkResult]
            switch database {
            case .success(let lease):
                // A CANCEL of one member stops the group's statement: the others then run
                // alone, the cancelled one not again. One cancelled while queued runs not at all.
                let canceller = lease.connection.canceller()
                let admitted = entries.map { $0.cancel.begin(canceller) }
                let running = zip(entries, admitted).filter(\.1).map(\.0)
                let ran = DatabaseWork.runSaves(running.map(\.work), WorkContext(lease: lease, sink: NoLines(), settings: settings)) { index in
                    running[index].cancel.isRequested
                }
                var answers = ran.makeIterator()
                results = admitted.map { $0 ? answers.next()! : WorkResult(reply: .cancelled) }
            case .failure(let error):
                results = entries.map { _ in WorkResult(reply: unavailable(error)) }
            }
            for index in results.indices { results[index].reply = entries[index].cancel.answer(results[index].reply) }
            // Each session is charged its share of the connection's time.
            let held = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9 / Double(entries.count)
            for (entry, result) in zip(entries, results) {
                inbox.post(.finished(connection: entry.connection, bytes: encoded(result.reply, limit: maxReplyBytes),
                                     effects: result.apply.map { [$0] } ?? [], held: held, delay: result.delay))
            }
        }
    }
}

/// A SAVE streams nothing.
private final class NoLines: LineSink {
    func send(_ lines: [UInt8]) -> Bool { false }
    var stalled: Bool { false }
    var stopping: Bool { false }
    var left: Bool { false }
}
