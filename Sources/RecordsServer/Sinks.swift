import Foundation
import Records

/// Carries a streaming step's data lines from its pool worker to the loop, blocking the worker
/// while the client's output is above the high-water mark: a slow reader slows the query,
/// never the server's memory. A client that reads nothing for `stallSeconds` loses the wait:
/// `send` gives up, so the query stops and its pooled connection goes back.
final class StreamSink: LineSink, @unchecked Sendable {  // `gone`/`stalled` are written before `signal` or by the waiting worker, read after `wait`
    private unowned let server: Server
    private let connection: ClientConnection
    private let semaphore = DispatchSemaphore(value: 0)
    private let stallSeconds: Int
    private var gone = false
    private(set) var stalled = false

    init(server: Server, connection: ClientConnection, stallSeconds: Int) {
        self.server = server
        self.connection = connection
        self.stallSeconds = stallSeconds
    }

    func send(_ lines: [UInt8]) -> Bool {
        guard !gone, !stalled else { return false }
        server.eventLoop.post { [self] in server.deliver(lines, to: connection, sink: self) }
        if semaphore.wait(timeout: .now() + .seconds(stallSeconds)) == .timedOut {
            stalled = true
            return false
        }
        return !gone
    }

    /// On the loop: lets the worker go on.
    func release(gone: Bool) {
        if gone { self.gone = true }
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

    func send(_ lines: [UInt8]) -> Bool {
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
