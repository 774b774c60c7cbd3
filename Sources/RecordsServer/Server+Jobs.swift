import Dispatch
import Postgres
import Records
import RecordsProtocol

/// A connection's steps as pool jobs: the works run in order on one pooled connection, and
/// their replies and effects come back to the loop as one message.
extension Server {
    /// Runs `works` in order as one job on a pool worker. The session stays on the loop and
    /// reads nothing meanwhile, so replies stay in order; each work's effects on the session
    /// come back with the reply bytes and are applied there, in order.
    func submit(_ connection: ClientConnection, _ works: [BatchItem]) {
        if queueSave(connection, works) { return }
        connection.machine.startedDatabase()
        let sink = StreamSink(inbox: inbox, connection: connection.id, stallSeconds: configuration.replyStallSeconds, metrics: context.metrics)
        connection.streamSink = sink
        let id = connection.id
        let maxReplyBytes = configuration.maxReplyBytes
        let highWater = configuration.outputHighWater
        let settings = context.work
        let holds = works.compactMap { if case .work(let work) = $0 { work.hold } else { nil } }
        // --durable-units: edits answered before this step are written first, in the same job,
        // so no reply goes out (a slow step lets earlier ones go) before what it acknowledged.
        let durable = durableEntry(connection)
        if durable != nil { connection.machine.writesAhead() }
        let ttl = configuration.resumeTTL, server = context.serverID
        // A sign-in is short and bounded: a new client gets it even while slow ones hold the rest.
        let standing = holds.contains(.signIn) ? .proven : connection.poolUse.standing()
        let cancelBox = connection.cancelBox
        let generation = cancelBox.submitted()
        pool.submit(standing, streams: holds.contains(.streams)) { [inbox, pool] database in
            defer { cancelBox.finished(generation) }
            let started = DispatchTime.now().uptimeNanoseconds
            let batch = BatchSink(sink: sink, limit: highWater)
            var effects: [@Sendable (Session) -> Void] = []
            var delay = 0.0
            if let (entry, version) = durable {
                let failure = Self.store([entry], ttl: ttl, server: server, open: true, database)
                inbox.post(.persisted(connection: id, version: version, pending: entry.pending, failure: failure, ahead: true))
            }
            let context = (try? database.get()).map { WorkContext(lease: $0, sink: batch, settings: settings, lend: pool.submitIfIdle) }
            // A CANCEL that came while the job waited: its works are answered without running.
            let proceed = cancelBox.begin(context?.lease.connection.canceller())
            // Past a client that stopped reading, works are answered without being run.
            var open = true
            func answer(_ result: WorkResult?) {
                guard open, let result else {
                    return Reply.error(.limit, "not run: the client read nothing for \(settings.replyStall) s").encode(into: &batch.pending)
                }
                batch.pending += Self.encoded(cancelBox.answer(result.reply), limit: maxReplyBytes)
                if let apply = result.apply { effects.append(apply) }
                delay = max(delay, result.delay)
                if !batch.flushIfLarge() { open = false }  // one large reply at a time
            }
            var index = works.startIndex
            while index < works.endIndex {
                if !proceed, case .work = works[index] {
                    Reply.cancelled.encode(into: &batch.pending)
                    index += 1
                    continue
                }
                // Reads that can share a round trip go to PostgreSQL as one pipeline.
                let reads = Self.pipelinableRun(works[index...])
                if reads.count > 1, open, let context {
                    DatabaseWork.runPipelined(reads, context) { answer($0) }
                    index += reads.count
                    continue
                }
                switch works[index] {
                case .reply(let bytes):
                    batch.pending += bytes
                    if open && !batch.flushIfLarge() { open = false }
                case .work(let work):
                    if open, context == nil, case .failure(let error) = database {
                        Self.unavailable(error).encode(into: &batch.pending)
                        if !batch.flushIfLarge() { open = false }
                    } else {
                        answer(open ? context.map(work.run) : nil)
                    }
                }
                index += 1
            }
            let bytes = batch.pending
            let held = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
            inbox.post(.finished(connection: id, bytes: bytes, effects: effects, held: held, delay: delay))
        }
    }

    /// The reply's bytes, or a LIMIT error in its place when it is too large to hold.
    static func encoded(_ reply: Reply, limit: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(reply.lines.isEmpty ? 96 : 1024)
        encode(reply, into: &bytes, limit: limit)
        return bytes
    }

    /// `reply`'s wire form appended to `out`; past `limit` bytes, a LIMIT error in its place.
    static func encode(_ reply: Reply, into out: inout [UInt8], limit: Int) {
        let start = out.count
        reply.encode(into: &out)
        let size = out.count - start
        guard size > limit else { return }
        out.removeSubrange(start...)
        Reply.error(.limit, "reply too large (\(reply.lines.count) lines, \(size) bytes; the limit is \(limit)): narrow it, or use FIND, which streams")
            .encode(into: &out)
    }

    static func unavailable(_ error: PostgresError) -> Reply {
        .error(.unavailable, "PostgreSQL is unavailable (\(error.message)); pending changes are kept: try again when it is back")
    }
}

extension Server {
    /// The works at the start of `items` that `DatabaseWork.runPipelined` can send together.
    static func pipelinableRun(_ items: ArraySlice<BatchItem>) -> [DatabaseWork] {
        var run: [DatabaseWork] = []
        for item in items {
            guard case .work(let work) = item, work.isPipelinable else { break }
            run.append(work)
        }
        return run
    }
}

/// One command of a pool job: a reply known on the loop, or database work.
enum BatchItem: Sendable {
    case reply([UInt8])
    case work(DatabaseWork)
}
