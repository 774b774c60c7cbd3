import Foundation
import Records

/// Carries a streaming step's data lines from its pool worker to the loop, blocking the worker
/// while the client's output is above the high-water mark: a slow reader slows the query,
/// never the server's memory. A client that takes no byte for `stallSeconds` loses the wait:
/// `send` gives up, so the query stops and its pooled connection goes back. A client that
/// reads slowly but steadily keeps it, however long a batch (a record of megabytes) takes.
final class StreamSink: LineSink, @unchecked Sendable {  // `gone`, `didStall`, `didStop`, `lastTaken` guarded by `lock`; `inFlight` the worker's; the rest immutable
    private let inbox: LoopInbox<ServerMessage>
    private let connection: Int
    private let semaphore = DispatchSemaphore(value: 0)
    private let stallSeconds: Int
    private let lock = NSLock()
    private var gone = false
    private var didStall = false
    private var didStop = false
    private let metrics: Metrics
    /// The worker's own: lines posted that the loop has not yet let go of.
    private var inFlight = false
    /// When the client last took bytes of the connection's output (uptime nanoseconds).
    private var lastTaken = DispatchTime.now().uptimeNanoseconds

    init(inbox: LoopInbox<ServerMessage>, connection: Int, stallSeconds: Int, metrics: Metrics) {
        self.inbox = inbox
        self.connection = connection
        self.stallSeconds = stallSeconds
        self.metrics = metrics
    }

    var stalled: Bool {
        lock.lock()
        defer { lock.unlock() }
        return didStall
    }

    var stopping: Bool {
        lock.lock()
        defer { lock.unlock() }
        return didStop
    }

    var left: Bool {
        lock.lock()
        defer { lock.unlock() }
        return gone
    }

    private var ended: Bool {
        lock.lock()
        defer { lock.unlock() }
        return gone || didStall || didStop
    }

    /// On the loop, the server stopping: the step's next `send` refuses (one waiting now is
    /// let go), so a stream ends with its status line instead of holding the shutdown.
    func stop() {
        lock.lock()
        didStop = true
        lock.unlock()
        semaphore.signal()
    }

    /// On the worker: hands `lines` to the loop once the client has room for the lines sent
    /// before, and goes on: the worker writes the next batch while the loop sends this one
    /// (waiting right after each send cost a FIND of 10⁶ rows a tenth of its time). False when
    /// the stream must stop (the client stalled or left, the server stops); the lines are
    /// handed over all the same unless the client left, so the count a reply gives is the
    /// count the client gets.
    func send(_ lines: [UInt8]) -> Bool {
        if inFlight && !ended {
            // Until the loop lets go, or `stallSeconds` pass with no byte taken: waiting a
            // fixed time for the whole batch stopped a steady reader of a large record.
            while true {
                let since = takenAt()
                if semaphore.wait(timeout: DispatchTime(uptimeNanoseconds: since + UInt64(stallSeconds) * 1_000_000_000)) == .success {
                    inFlight = false
                    break
                }
                if takenAt() == since {
                    lock.lock()
                    didStall = true
                    lock.unlock()
                    metrics.add(.repliesStalled)
                    break
                }
            }
        }
        lock.lock()
        let left = gone
        let goOn = !gone && !didStall && !didStop
        lock.unlock()
        guard !left else { return false }
        inbox.post(.streamed(connection: connection, lines: lines, sink: self))
        inFlight = true
        return goOn
    }

    /// On the loop: the client took some of the connection's output.
    func taken(at now: UInt64) {
        lock.lock()
        lastTaken = now
        lock.unlock()
    }

    private func takenAt() -> UInt64 {
        lock.lock()
        defer { lock.unlock() }
        return lastTaken
    }

    /// On the loop: lets the worker go on.
    func release(gone: Bool) {
        if gone {
            lock.lock()
            self.gone = true
            lock.unlock()
        }
        semaphore.signal()
    }
}

/// A job's replies so far, sent ahead of any streamed records so the order holds, and sent
/// on as they pile up past `limit` bytes: a batch of pipelined reads holds at most about one
/// reply and the output's high-water mark in memory, whatever their number.
final class BatchSink: LineSink {
    let sink: LineSink
    let limit: Int
    var pending: [UInt8] = []

    init(sink: LineSink, limit: Int) {
        self.sink = sink
        self.limit = limit
    }

    var stalled: Bool { sink.stalled }
    var stopping: Bool { sink.stopping }
    var left: Bool { sink.left }

    func send(_ lines: [UInt8]) -> Bool {
        // A stream's batches pass as they are: copying each into `pending` cost a FIND a
        // tenth of the encoder's work.
        guard !pending.isEmpty else { return sink.send(lines) }
        let bytes = pending + lines
        pending.removeAll()
        return sink.send(bytes)
    }

    /// Sends what is held once it passes the limit; false when the client is gone or stalled.
    func flushIfLarge() -> Bool {
        guard pending.count >= limit else { return true }
        let bytes = pending
        pending.removeAll()
        return sink.send(bytes)
    }
}
