#if canImport(Glibc)
import Glibc
#endif

/// What carries a connection's bytes: a plain socket, or (later) TLS over one. The connection's
/// state machine and the server see only this, so a second transport changes neither.
protocol Transport: AnyObject {
    var fd: Int32 { get }
    /// Reads what is available into `buffer`.
    func read(into buffer: UnsafeMutableRawBufferPointer) -> TransportRead
    /// Writes what the transport takes now from `bytes`.
    func write(_ bytes: UnsafeRawBufferPointer) -> TransportWrite
    /// The transport needs the socket readable (or writable) to go on, whatever the
    /// connection wants: a TLS handshake or renegotiation reads to write and writes to read.
    var wantsRead: Bool { get }
    var wantsWrite: Bool { get }
    /// Bytes already received that the socket's readiness will not announce again (TLS
    /// holds the rest of a record): read again without waiting.
    var hasBufferedInput: Bool { get }
    func close()
    /// Says goodbye and shuts the socket's write side (FIN after what was written); the socket
    /// stays open to read what the client still sends, then the server closes it.
    func finishWriting()
}

enum TransportRead: Equatable {
    case bytes(Int)
    /// Nothing now; the loop waits for the socket.
    case wouldBlock
    /// The peer closed its side (or the transport failed): nothing more will come.
    case closed
}

enum TransportWrite: Equatable {
    case wrote(Int)
    case wouldBlock
    case failed
}

/// The socket itself.
final class PlainTransport: Transport {
    let fd: Int32

    init(fd: Int32) {
        self.fd = fd
    }

    func read(into buffer: UnsafeMutableRawBufferPointer) -> TransportRead {
        while true {
            let count = recv(fd, buffer.baseAddress!, buffer.count, 0)
            if count > 0 { return .bytes(count) }
            if count < 0 && errno == EINTR { continue }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return .wouldBlock }
            return .closed
        }
    }

    func write(_ bytes: UnsafeRawBufferPointer) -> TransportWrite {
        while true {
            let written = send(fd, bytes.baseAddress!, bytes.count, Int32(MSG_NOSIGNAL))
            if written >= 0 { return .wrote(written) }
            if errno == EINTR { continue }
            if errno == EAGAIN || errno == EWOULDBLOCK { return .wouldBlock }
            return .failed
        }
    }

    var wantsRead: Bool { false }
    var wantsWrite: Bool { false }
    var hasBufferedInput: Bool { false }

    func close() {
        _ = Glibc.close(fd)
    }

    func finishWriting() {
        _ = Glibc.shutdown(fd, Int32(SHUT_WR))
    }
}
