import Foundation
import Records

/// Carries a streaming step's data lines from its pool worker to the loop, blocking the worker
/// while the client's output is above the high-water mark: a slow reader slows the query,
/// never the server's memory.
final class StreamSink: LineSink, @unchecked Sendable {  // `gone` is written before `signal`, read after `wait`
    private unowned let server: Server
    private let connection: ClientConnection
    private let semaphore = DispatchSemaphore(value: 0)
    private var gone = false

    init(server: Server, connection: ClientConnection) {
        self.server = server
        self.connection = connection
    }

    func send(_ lines: [UInt8]) -> Bool {
        guard !gone else { return false }
        server.eventLoop.post { [self] in server.deliver(lines, to: connection, sink: self) }
        semaphore.wait()
        return !gone
    }

    /// On the loop: lets the worker go on.
    func release(gone: Bool) {
        if gone { self.gone = true }
        semaphore.signal()
    }
}

/// A batch's replies so far, sent ahead of any streamed records so the order holds.
final class BatchSink: LineSink {
    let sink: LineSink
    var pending: [UInt8] = []

    init(sink: LineSink) { self.sink = sink }

    func send(_ lines: [UInt8]) -> Bool {
        let bytes = pending + lines
        pending.removeAll()
        return sink.send(bytes)
    }
}
