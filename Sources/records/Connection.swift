#if canImport(Glibc)
import Glibc
#endif
import Foundation
import TLS

struct ConnectError: Error, CustomStringConvertible { var description: String }

/// A reply off the wire: data lines, then the status line.
struct ServerReply {
    var lines: [String]
    var status: String
    var ok: Bool { status.hasPrefix("+OK") }
    var message: String {
        if status.hasPrefix("+OK ") { return String(status.dropFirst(4)) }
        if status.hasPrefix("-ERR ") { return String(status.dropFirst(5)) }
        return ""
    }
}

/// How the CLI reaches the server's bytes: in clear, or over TLS.
enum Security {
    case plain
    /// STARTTLS after the banner (the server's usual port).
    case startTLS(TLSContext)
    /// TLS from the first byte (the server's `--tls-listen` port, `recordss://`).
    case direct(TLSContext)
}

/// A blocking connection to recordsd speaking the line protocol.
final class ServerConnection {
    private let fd: Int32
    private var tls: TLSStream?
    private var buffer: [UInt8] = []
    private var start = 0
    private(set) var banner = ""
    /// Pushed lines (`! ...`) seen while reading replies.
    var onPushed: ((String) -> Void)?

    init(host: String, port: Int, security: Security = .plain) throws {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var info: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &info) == 0, let first = info else {
            throw ConnectError(description: "could not connect to \(host):\(port): unknown host")
        }
        defer { freeaddrinfo(info) }
        var lastError: Int32 = 0
        var connected: Int32 = -1
        var entry: UnsafeMutablePointer<addrinfo>? = first
        while let current = entry {
            let fd = socket(current.pointee.ai_family, Int32(SOCK_STREAM.rawValue), 0)
            if fd >= 0 && connect(fd, current.pointee.ai_addr, current.pointee.ai_addrlen) == 0 { connected = fd; break }
            lastError = errno
            if fd >= 0 { close(fd) }
            entry = current.pointee.ai_next
        }
        guard connected >= 0 else {
            throw ConnectError(description: "could not connect to \(host):\(port): \(String(cString: strerror(lastError)).lowercased()) — is recordsd running? start it with `scripts/serve` (or `recordsd`)")
        }
        fd = connected
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        if case .direct(let context) = security { try secure(context, host: host) }
        guard let line = try readLine() else { throw ConnectError(description: "could not connect to \(host):\(port): the server closed the connection") }
        if line.hasPrefix("-ERR") { throw ConnectError(description: "\(host):\(port) refused the session: \(line.dropFirst(5))") }
        banner = line
        if case .startTLS(let context) = security {
            let reply = try send("STARTTLS")
            guard reply.ok else { throw ConnectError(description: "\(host):\(port) cannot switch to TLS: \(reply.message)") }
            try secure(context, host: host)
        }
    }

    /// The TLS handshake, checking the server's certificate and its name.
    private func secure(_ context: TLSContext, host: String) throws {
        let stream = try context.stream(fd: fd, serverName: host)
        do {
            try stream.handshake()
        } catch {
            throw ConnectError(description: "TLS with \(host) failed: \(error)")
        }
        tls = stream
        buffer.removeAll()
        start = 0
    }

    deinit {
        tls?.shutdown()
        close(fd)
    }

    func write(_ text: String) throws {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n: Int = bytes.withUnsafeMutableBytes { raw in
                let rest = UnsafeRawBufferPointer(rebasing: raw[offset...])
                if let tls {
                    if case .bytes(let count) = tls.write(rest) { return count }
                    return -1
                }
                return Glibc.send(fd, rest.baseAddress!, rest.count, Int32(MSG_NOSIGNAL))
            }
            if n < 0 && tls == nil && errno == EINTR { continue }  // Ctrl-C in the shell: not a lost connection
            guard n > 0 else { throw ConnectError(description: "the connection to the server was lost") }
            offset += n
        }
    }

    /// The next line, nil at end of stream.
    func readLine() throws -> String? {
        while true {
            if let newline = buffer[start...].firstIndex(of: 10) {
                let line = String(decoding: buffer[start..<newline], as: UTF8.self)
                start = newline + 1
                if start > 65536 { buffer.removeFirst(start); start = 0 }
                return line
            }
            var chunk = [UInt8](repeating: 0, count: 65536)
            errno = 0
            let n: Int = chunk.withUnsafeMutableBytes { raw in
                if let tls {
                    if case .bytes(let count) = tls.read(into: raw) { return count }
                    return errno == EINTR ? -1 : 0
                }
                return recv(fd, raw.baseAddress!, raw.count, 0)
            }
            if n < 0 && errno == EINTR { continue }  // Ctrl-C in the shell: not a lost connection
            if n <= 0 { return nil }
            buffer.append(contentsOf: chunk[0..<n])
        }
    }

    /// Reads one reply, handing each data line to `line` as it arrives (for streaming output).
    func readReply(line: ((String) -> Void)? = nil) throws -> ServerReply {
        var lines: [String] = []
        while let text = try readLine() {
            if text.hasPrefix("+OK") || text.hasPrefix("-ERR") { return ServerReply(lines: lines, status: text) }
            if text.hasPrefix("!") { onPushed?(text); continue }
            if let line { line(text) } else { lines.append(text) }
        }
        throw ConnectError(description: "the server closed the connection")
    }

    func send(_ command: String) throws -> ServerReply {
        try write(command + "\n")
        return try readReply()
    }
}
