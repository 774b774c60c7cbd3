#if canImport(Glibc)
import Glibc
#endif
import Foundation
import TLS

/// A reply as read off the wire: data lines, then the status line.
struct WireReply: CustomStringConvertible {
    var lines: [String]
    var status: String

    var ok: Bool { status.hasPrefix("+OK") }
    /// The status line without its `+OK ` / `-ERR ` prefix.
    var message: String {
        if status.hasPrefix("+OK ") { return String(status.dropFirst(4)) }
        if status.hasPrefix("-ERR ") { return String(status.dropFirst(5)) }
        return status == "+OK" ? "" : status
    }
    var description: String { (lines + [status]).joined(separator: "\n") }
}

/// A blocking TCP client of the line protocol, with a receive timeout so a test cannot hang.
final class LineClient {
    let fd: Int32
    /// Set once the connection speaks TLS (`startTLS`, `secure`).
    private var tls: TLSStream?
    private var buffer: [UInt8] = []
    private var start = 0
    private var scanned = 0
    private var chunk = [UInt8](repeating: 0, count: 65536)
    /// Pushed `!` lines seen while reading replies.
    private(set) var pushed: [String] = []
    private(set) var banner = ""
    /// Keeps the server this client talks to alive as long as the client.
    var owner: AnyObject?

    /// - Parameters:
    ///   - source: a loopback address to connect from (127.0.0.2 ...), to be another client host.
    ///   - directTLS: TLS from the first byte (a `--tls-listen` port), trusting this CA file.
    init(port: Int, host: String = "127.0.0.1", source: String? = nil, timeout: Int = 20, readBanner: Bool = true,
         directTLS ca: String? = nil, serverName: String = "localhost") throws {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.fd = fd
        if let source {
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            inet_pton(AF_INET, source, &local.sin_addr)
            _ = withUnsafePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
        }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        if inet_pton(AF_INET, host, &address.sin_addr) != 1 {
            // A name (a compose service): its first IPv4 address.
            var hints = addrinfo()
            hints.ai_family = AF_INET
            hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
            var info: UnsafeMutablePointer<addrinfo>?
            guard getaddrinfo(host, nil, &hints, &info) == 0, let first = info else {
                Glibc.close(fd)
                throw TestFailure("cannot resolve \(host)")
            }
            address.sin_addr = first.pointee.ai_addr.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
            freeaddrinfo(info)
        }
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            close(fd)
            throw TestFailure("connect to \(host):\(port) failed: \(String(cString: strerror(errno)))")
        }
        var tv = timeval(tv_sec: timeout, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
        if let ca { try secure(ca: ca, serverName: serverName) }
        if readBanner { banner = try readLine() ?? "" }
    }

    /// STARTTLS, then the handshake; `behind` is sent in clear in the same write as STARTTLS
    /// (what a man in the middle would inject).
    func startTLS(ca: String, serverName: String = "localhost", behind: String = "") throws {
        try write("STARTTLS\n" + behind)
        let reply = try readReply()
        guard reply.status == "+OK begin TLS" else { throw TestFailure("STARTTLS: \(reply.status)") }
        try secure(ca: ca, serverName: serverName)
    }

    private func secure(ca: String, serverName: String) throws {
        let stream = try TLSContext.client(caFile: ca).stream(fd: fd, serverName: serverName)
        try stream.handshake()
        tls = stream
        buffer.removeAll()
        start = 0
        scanned = 0
    }

    deinit { Glibc.close(fd) }

    func write(_ text: String) throws {
        try writeBytes(Array(text.utf8))
    }

    func writeBytes(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { raw -> Int in
                if let tls {
                    if case .bytes(let count) = tls.write(raw) { return count }
                    return -1
                }
                return Glibc.send(fd, raw.baseAddress!, raw.count, Int32(MSG_NOSIGNAL))
            }
            guard n > 0 else { throw TestFailure("send failed: \(String(cString: strerror(errno)))") }
            offset += n
        }
    }

    /// The next line, nil at end of stream. Linear in the bytes read: a line of megabytes is
    /// scanned once, and lines are taken from a moving start.
    func readLine() throws -> String? {
        while true {
            if let newline = buffer[scanned...].firstIndex(of: 10) {
                let line = String(decoding: buffer[start..<newline], as: UTF8.self)
                start = newline + 1
                scanned = start
                if start == buffer.count {
                    buffer.removeAll(keepingCapacity: true)
                    start = 0
                    scanned = 0
                }
                return line
            }
            scanned = buffer.count
            if start > 0 && start * 2 >= buffer.count {
                buffer.removeSubrange(0..<start)
                scanned -= start
                start = 0
            }
            let n = chunk.withUnsafeMutableBytes { raw -> Int in
                if let tls {
                    switch tls.read(into: raw) {
                    case .bytes(let count): return count
                    case .closed: return 0
                    default: return -1
                    }
                }
                return recv(fd, raw.baseAddress!, raw.count, 0)
            }
            if n == 0 { return nil }
            if n < 0 { throw TestFailure("recv failed (timeout?): \(String(cString: strerror(errno)))") }
            buffer.append(contentsOf: chunk[0..<n])
        }
    }

    /// Reads one whole reply; pushed lines are set aside.
    func readReply() throws -> WireReply {
        var lines: [String] = []
        while let line = try readLine() {
            if line.hasPrefix("+OK") || line.hasPrefix("-ERR") { return WireReply(lines: lines, status: line) }
            if line.hasPrefix("!") { pushed.append(line); continue }
            lines.append(line)
        }
        throw TestFailure("connection closed mid-reply after \(lines)")
    }

    /// Sends one line and reads its reply.
    @discardableResult
    func send(_ line: String) throws -> WireReply {
        try write(line + "\n")
        return try readReply()
    }

    /// Sends, and requires `+OK`.
    @discardableResult
    func ok(_ line: String, sourceLocation: String = #function) throws -> WireReply {
        let reply = try send(line)
        guard reply.ok else { throw TestFailure("\(line) -> \(reply)") }
        return reply
    }

    /// Reads until the server closes; returns the rest.
    func readToEnd() throws -> [String] {
        var lines: [String] = []
        while let line = try readLine() { lines.append(line) }
        return lines
    }
}
