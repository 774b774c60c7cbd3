#if canImport(Glibc)
import Glibc
#endif
import TLS

/// TLS over a client's socket, non-blocking. The handshake runs inside the first reads and
/// writes; while it (or a renegotiation) needs the socket the other way round, `wantsRead` or
/// `wantsWrite` tells the loop to wait for that too.
final class TLSTransport: Transport {
    let fd: Int32
    private let stream: TLSStream
    /// A write waits for the peer (the handshake needs its next message).
    private var writeWantsRead = false
    /// A read waits for the socket to take bytes (the handshake needs to send).
    private var readWantsWrite = false

    /// Told once how the handshake ended (true: done), for the metrics.
    private var handshakeReport: ((Bool) -> Void)?

    init(fd: Int32, context: TLSContext, handshake: ((Bool) -> Void)? = nil) throws(TLSError) {
        self.fd = fd
        self.stream = try context.stream(fd: fd)
        self.handshakeReport = handshake
    }

    /// Reports the handshake's end once: done, or failed before it was.
    private func reportHandshake(failed: Bool) {
        guard let report = handshakeReport else { return }
        if failed || stream.isHandshakeDone {
            handshakeReport = nil
            report(!failed)
        }
    }

    var wantsRead: Bool { writeWantsRead }
    var wantsWrite: Bool { readWantsWrite }
    var hasBufferedInput: Bool { stream.hasBufferedInput }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> TransportRead {
        var total = 0
        while total < buffer.count {
            let outcome = stream.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[total...]))
            switch outcome {
            case .bytes(let count):
                total += count
                readWantsWrite = false
                continue
            case .wantRead:
                readWantsWrite = false
            case .wantWrite:
                readWantsWrite = true
            case .closed, .failed:
                reportHandshake(failed: !stream.isHandshakeDone)
                return total > 0 ? .bytes(total) : .closed
            }
            break
        }
        reportHandshake(failed: false)
        return total > 0 ? .bytes(total) : .wouldBlock
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> TransportWrite {
        // A retried write must start with the same bytes; more may follow them.
        switch stream.write(UnsafeRawBufferPointer(rebasing: bytes.prefix(64 * 1024))) {
        case .bytes(let count):
            writeWantsRead = false
            return .wrote(count)
        case .wantRead:
            writeWantsRead = true
            return .wouldBlock
        case .wantWrite:
            writeWantsRead = false
            return .wouldBlock
        case .closed, .failed:
            reportHandshake(failed: !stream.isHandshakeDone)
            return .failed
        }
    }

    func close() {
        stream.shutdown()
        _ = Glibc.close(fd)
    }

    func finishWriting() {
        stream.shutdown()
        _ = Glibc.shutdown(fd, Int32(SHUT_WR))
    }
}
