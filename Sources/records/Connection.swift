#if canImport(Glibc)
import Glibc
#endif
import Foundation

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

/// A blocking connection to recordsd speaking the line protocol.
final class ServerConnection {
    private let fd: Int32
    private var buffer: [UInt8] = []
    private var start = 0
    private(set) var banner = ""
    /// Pushed lines (`! ...`) seen while reading replies.
    var onPushed: ((String) -> Void)?

    init(host: String, port: Int) throws {
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
        guard let line = try readLine() else { throw ConnectError(description: "could not connect to \(host):\(port): the server closed the connection") }
        if line.hasPrefix("-ERR") { throw ConnectError(description: "\(host):\(port) refused the session: \(line.dropFirst(5))") }
        banner = line
    }

    deinit { close(fd) }

    func write(_ text: String) throws {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let n = bytes.withUnsafeMutableBytes { Glibc.send(fd, $0.baseAddress! + offset, $0.count - offset, Int32(MSG_NOSIGNAL)) }
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
            let n = recv(fd, &chunk, chunk.count, 0)
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
