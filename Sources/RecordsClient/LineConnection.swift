#if canImport(Glibc)
import Glibc
#endif
import Foundation
import RecordsProtocol
import TLS

/// How a connection reaches the server's bytes.
public enum Security: Sendable, Equatable {
    case plain
    /// STARTTLS after the banner (the server's usual port), trusting `caFile`'s CAs (else the
    /// system's).
    case startTLS(caFile: String?)
    /// TLS from the first byte (the server's `--tls-listen` port, `recordss://`).
    case direct(caFile: String?)
}

/// A blocking connection speaking the line protocol: the one client of it in this repo, under
/// the async `RecordsClient`, the `records` CLI and the integration tests. Not thread-safe: one
/// owner (a serial queue, the CLI's main thread); only `shutdownBoth` may come from elsewhere.
public final class LineConnection {
    public struct Options: Sendable {
        public var security: Security = .plain
        /// The name the server's certificate must carry (default: the host connected to).
        public var serverName: String?
        /// Give up connecting after this many seconds (default: the system's).
        public var connectTimeout: Double?
        /// A read that waits longer than this fails (default: forever).
        public var receiveTimeout: Double?
        /// A local IPv4 address to connect from (another client host on loopback, in tests).
        public var source: String?
        /// Read the server's first line (false: a test that sends before it).
        public var readBanner = true

        public init(security: Security = .plain, serverName: String? = nil, connectTimeout: Double? = nil,
                    receiveTimeout: Double? = nil, source: String? = nil, readBanner: Bool = true) {
            self.security = security
            self.serverName = serverName
            self.connectTimeout = connectTimeout
            self.receiveTimeout = receiveTimeout
            self.source = source
            self.readBanner = readBanner
        }
    }

    private let fd: Int32
    private var closed = false
    private var tls: TLSStream?
    private var reader = ReplyReader()
    /// Reused by every read (a fresh 64 KiB array a read cost more than the reply's parsing).
    private var chunk = [UInt8](repeating: 0, count: 65536)
    public let host: String
    public let port: Int
    /// The server's first line (`+OK recordsd 0.1.0 ready ...`).
    public private(set) var banner = ""
    /// Called with each pushed line (`! ...`, the `! ` removed) read while waiting for replies;
    /// when nil they are kept in `pushed`.
    public var onPushed: ((String) -> Void)?
    public var pushed: [String] = []
    /// Called before a read that may wait for the server (no whole line is at hand): the CLI
    /// flushes its output there, so a pipe gets each batch at once and one write per batch.
    public var beforeWaiting: (() -> Void)?
    /// Called every fifth of a second while a read waits for the server, and when a signal
    /// interrupts it (the shell looks for a Ctrl-C, and asks the server to cancel the
    /// command); the wait goes on.
    public var onInterrupted: (() -> Void)?

    public init(host: String, port: Int, options: Options = Options()) throws(RecordsError) {
        self.host = host
        self.port = port
        fd = try Self.connect(host: host, port: port, options: options)
        // Until the session is set up (TLS, banner), a server that accepts and says nothing
        // is given the connect timeout, not forever.
        Self.setReceiveTimeout(fd, options.connectTimeout ?? options.receiveTimeout)
        let serverName = options.serverName ?? host
        if case .direct(let caFile) = options.security { try secure(caFile: caFile, serverName: serverName) }
        if options.readBanner {
            guard let line = try readLine() else { throw .connection("\(host):\(port): the server closed the connection") }
            if line.hasPrefix("-ERR") { throw .connection("\(host):\(port) refused the session: \(line.dropFirst(5))") }
            banner = line
            if case .startTLS(let caFile) = options.security { try startTLS(caFile: caFile, serverName: serverName) }
        }
        Self.setReceiveTimeout(fd, options.receiveTimeout)
        receiveTimeout = options.receiveTimeout
    }

    /// The longest a read waits (SO_RCVTIMEO); nil: for ever.
    private var receiveTimeout: Double?

    /// SO_RCVTIMEO: a read that waits longer fails (nil: waits forever).
    private static func setReceiveTimeout(_ fd: Int32, _ seconds: Double?) {
        let seconds = seconds ?? 0
        var tv = timeval(tv_sec: Int(seconds), tv_usec: Int((seconds - seconds.rounded(.down)) * 1_000_000))
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, socklen_t(MemoryLayout<timeval>.size))
    }

    deinit { close() }

    // MARK: - Connecting

    private static func connect(host: String, port: Int, options: Options) throws(RecordsError) -> Int32 {
        guard (1...65535).contains(port) else { throw .invalidRequest("a port is 1 to 65535, not \(port)") }
        var hints = addrinfo()
        hints.ai_family = options.source == nil ? AF_UNSPEC : AF_INET
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            throw .unreachable("could not connect to \(host):\(port): \(String(cString: gai_strerror(status)).lowercased())")
        }
        defer { freeaddrinfo(list) }
        var lastError = ECONNREFUSED
        var address: UnsafeMutablePointer<addrinfo>? = first
        while let candidate = address {
            address = candidate.pointee.ai_next
            let fd = socket(candidate.pointee.ai_family, candidate.pointee.ai_socktype, candidate.pointee.ai_protocol)
            guard fd >= 0 else { lastError = errno; continue }
            if let source = options.source { bind(fd, to: source) }
            let error = connect(fd, candidate.pointee.ai_addr, candidate.pointee.ai_addrlen, timeout: options.connectTimeout)
            if error == 0 {
                var on: Int32 = 1
                setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
                return fd
            }
            lastError = error
            Glibc.close(fd)
        }
        let reason = lastError == ETIMEDOUT ? "timed out" : String(cString: strerror(lastError)).lowercased()
        throw .unreachable("could not connect to \(host):\(port): \(reason)")
    }

    /// 0, or the errno of the failed connect; with a timeout the connect is non-blocking and
    /// waited for with poll (EINTR, a Ctrl-C, does not end the wait early).
    private static func connect(_ fd: Int32, _ address: UnsafeMutablePointer<sockaddr>, _ length: socklen_t, timeout: Double?) -> Int32 {
        guard let timeout else {
            if Glibc.connect(fd, address, length) == 0 { return 0 }
            return errno == EINTR ? waitConnected(fd, timeout: nil) : errno
        }
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        defer { _ = fcntl(fd, F_SETFL, flags) }
        if Glibc.connect(fd, address, length) == 0 { return 0 }
        guard errno == EINPROGRESS || errno == EINTR else { return errno }
        return waitConnected(fd, timeout: timeout)
    }

    private static func waitConnected(_ fd: Int32, timeout: Double?) -> Int32 {
        let deadline = timeout.map { Date().addingTimeInterval($0) }
        while true {
            var entry = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            let wait = deadline.map { max(0, Int32($0.timeIntervalSinceNow * 1000)) } ?? -1
            let ready = poll(&entry, 1, wait)
            if ready < 0 && errno == EINTR { continue }
            if ready < 0 { return errno }
            if ready == 0 { return ETIMEDOUT }
            var error: Int32 = 0
            var size = socklen_t(MemoryLayout<Int32>.size)
            getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size)
            return error
        }
    }

    private static func bind(_ fd: Int32, to source: String) {
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        inet_pton(AF_INET, source, &local.sin_addr)
        _ = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }

    /// STARTTLS, then the handshake. `behind` is sent in clear in the same write as STARTTLS
    /// (what a man in the middle would inject; tests use it).
    public func startTLS(caFile: String?, serverName: String? = nil, behind: String = "") throws(RecordsError) {
        try write("STARTTLS\n" + behind)
        let reply = try readReply()
        guard reply.isOK else { throw .connection("\(host):\(port) cannot switch to TLS: \(reply.statusText)") }
        try secure(caFile: caFile, serverName: serverName ?? host)
    }

    /// The TLS handshake, checking the server's certificate and its name.
    private func secure(caFile: String?, serverName: String) throws(RecordsError) {
        do {
            let stream = try TLSContext.client(caFile: caFile).stream(fd: fd, serverName: serverName)
            try stream.handshake()
            tls = stream
        } catch {
            throw .connection("TLS with \(serverName) failed: \(error)")
        }
        reader = ReplyReader()
    }

    /// The negotiated TLS version, nil in clear.
    public var tlsVersion: String? { tls?.version }

    // MARK: - Bytes

    public func write(_ text: String) throws(RecordsError) {
        try write(bytes: Array(text.utf8))
    }

    public func write(bytes: [UInt8]) throws(RecordsError) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes[offset...].withUnsafeBytes { raw -> Int in
                if let tls {
                    if case .bytes(let count) = tls.write(raw) { return count }
                    return -1
                }
                return Glibc.send(fd, raw.baseAddress!, raw.count, Int32(MSG_NOSIGNAL))
            }
            if sent < 0 && tls == nil && errno == EINTR { continue }  // a signal (Ctrl-C) is not a lost connection
            guard sent > 0 else { throw .connection("the connection to the server was lost") }
            offset += sent
        }
    }

    /// Reads more bytes into the reader; false at the end of the stream.
    private func fill() throws(RecordsError) -> Bool {
        beforeWaiting?()
        if let onInterrupted, tls?.hasBufferedInput != true {
            // Waits in slices, looking for a Ctrl-C between them (a signal handler that
            // restarts the read would hide it); past the receive timeout the read decides.
            let deadline = receiveTimeout.map { Date().addingTimeInterval($0) }
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            while poll(&entry, 1, 200) <= 0 {
                onInterrupted()
                if let deadline, Date() > deadline { break }
            }
        }
        while true {
            let fd = self.fd
            errno = 0
            let count = chunk.withUnsafeMutableBytes { raw -> Int in
                if let tls {
                    switch tls.read(into: raw) {
                    case .bytes(let count): return count
                    case .closed: return 0
                    default: return errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK ? -1 : 0
                    }
                }
                return recv(fd, raw.baseAddress, raw.count, 0)
            }
            if count > 0 {
                try reader.append(chunk[0..<count])
                return true
            }
            if count == 0 { return false }
            if errno == EINTR {  // a signal (Ctrl-C) is not a lost connection
                onInterrupted?()
                continue
            }
            if errno == EAGAIN || errno == EWOULDBLOCK { throw .connection("no reply from the server in time") }
            throw .connection("read: \(String(cString: strerror(errno)))")
        }
    }

    /// The next line as sent, nil at the end of the stream.
    public func readLine() throws(RecordsError) -> String? {
        while true {
            if let line = reader.nextLine() { return line }
            guard try fill() else { return nil }
        }
    }

    /// Reads one reply. Data lines go to `onLine` as they arrive when given (streaming
    /// output), else into the reply; pushed lines go to `onPushed` (or `pushed`).
    public func readReply(dotStuffed: Bool = false, onLine: ((String) -> Void)? = nil) throws(RecordsError) -> WireReply {
        if !early.isEmpty {
            let reply = early.removeFirst()
            guard let onLine else { return reply }
            reply.lines.forEach(onLine)
            return WireReply(lines: [], status: reply.status)
        }
        while true {
            while let event = reader.next(dotStuffed: dotStuffed, onLine: onLine) {
                switch event {
                case .reply(let reply): return reply
                case .pushed(let line): if let onPushed { onPushed(arrived(line)) } else { pushed.append(arrived(line)) }
                }
            }
            guard try fill() else { throw .connection("the server closed the connection") }
        }
    }

    /// One line of a reply at a time (a pull-driven stream): the next data line, or the reply's
    /// status once its data ended; pushed lines go to `onPushed` (or `pushed`).
    public enum Piece: Sendable, Equatable {
        case data(String)
        case end(WireReply)
    }

    public func nextPiece(dotStuffed: Bool = false) throws(RecordsError) -> Piece {
        if !early.isEmpty {
            // A reply read ahead (by `closedByServer`): its lines one at a time, then its end.
            if let line = early[0].lines.first {
                early[0].lines.removeFirst()
                return .data(line)
            }
            return .end(early.removeFirst())
        }
        while true {
            while let piece = reader.nextPiece(dotStuffed: dotStuffed) {
                switch piece {
                case .data(let line): return .data(line)
                case .reply(let reply): return .end(reply)
                case .pushed(let text): if let onPushed { onPushed(arrived(text)) } else { pushed.append(arrived(text)) }
                }
            }
            guard try fill() else { throw .connection("the server closed the connection") }
        }
    }

    /// The next pushed line, skipping anything else; nil at the end of the stream.
    public func readPushed() throws(RecordsError) -> String? {
        if !pushed.isEmpty { return pushed.removeFirst() }
        while true {
            while let event = reader.next() {
                if case .pushed(let line) = event { return arrived(line) }
            }
            guard try fill() else { return nil }
        }
    }

    /// The token of the last `handoff` notice pushed on this connection: `RESUME` with it takes
    /// the session back on any server after this one stopped (or, with --durable-units, crashed).
    public private(set) var handOffToken: String?

    /// The server said it is stopping (`! shutdown ...`): a request it did not answer was not
    /// run (a stopping server reads nothing after its notices), so it may be sent again.
    public private(set) var serverStopped = false

    /// The server said the copy it keeps of this session is not what it answered (a state
    /// write failed, a hand-off failed), and no handoff notice came after: the session cannot
    /// be resumed as it was.
    public private(set) var handOffRevoked = false

    /// A pushed line as it arrives: a handoff notice's token is kept (and forgotten when the
    /// copy it names is said to be stale), a shutdown noted.
    private func arrived(_ line: String) -> String {
        if let token = Self.handOffToken(line) {
            handOffToken = token
            handOffRevoked = false
        } else if Notice.revokesHandOff(line) {
            handOffToken = nil
            handOffRevoked = true
        }
        if line.hasPrefix(Notice.shutdown(lost: nil).kind + " ") { serverStopped = true }
        return line
    }

    /// The token of a pushed `handoff TOKEN (...)` line (the server stopped and handed the
    /// session off: `RESUME TOKEN` takes it back on any server); nil for any other line.
    public static func handOffToken(_ pushed: String) -> String? {
        guard case .handOff(let token) = Notice.kind(of: pushed) else { return nil }
        return token
    }

    /// The socket, for a caller that waits on it with others (the shell's prompt, stdin).
    public var fileDescriptor: Int32 { fd }

    /// Bytes already read but not yet taken as lines (poll will not announce them).
    public var hasBufferedInput: Bool { reader.hasBufferedBytes || tls?.hasBufferedInput == true }

    /// The pushed lines that arrived while no request was waiting, without blocking when
    /// nothing did; nil when the server closed the connection.
    public func takeArrivedPushes() throws(RecordsError) -> [String]? {
        var lines: [String] = []
        while true {
            while let event = reader.next() {
                if case .pushed(let line) = event { lines.append(arrived(line)) }
            }
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard tls?.hasBufferedInput == true || poll(&entry, 1, 0) > 0 else { return lines }
            guard try fill() else { return lines.isEmpty ? nil : lines }
        }
    }

    /// Replies read ahead by `closedByServer`, given to the next reads first.
    private var early: [WireReply] = []

    /// Takes what arrived without blocking (pushed lines go to `onPushed` or `pushed`); true
    /// when the server has closed the connection. Over TLS the socket is read non-blocking for
    /// the check: a readable socket may hold a record with no data (a session ticket), which
    /// a blocking read would wait behind.
    public func closedByServer() -> Bool {
        while true {
            while let event = reader.next() {
                switch event {
                case .pushed(let line): if let onPushed { onPushed(arrived(line)) } else { pushed.append(arrived(line)) }
                case .reply(let reply): early.append(reply)  // kept for the read that asks for it
                }
            }
            var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&entry, 1, 0) > 0 || tls?.hasBufferedInput == true else { return false }
            if let tls {
                switch readWithoutWaiting(tls) {
                case .bytes: continue
                case .wantRead, .wantWrite: return false
                case .closed, .failed: return true
                }
            }
            guard (try? fill()) == true else { return true }
        }
    }

    /// One TLS read with the socket non-blocking for it, its bytes taken.
    private func readWithoutWaiting(_ tls: TLSStream) -> TLSStream.Outcome {
        let flags = fcntl(fd, F_GETFL)
        _ = fcntl(fd, F_SETFL, flags | O_NONBLOCK)
        defer { _ = fcntl(fd, F_SETFL, flags) }
        let outcome = chunk.withUnsafeMutableBytes { tls.read(into: $0) }
        if case .bytes(let count) = outcome {
            do { try reader.append(chunk[0..<count]) } catch { return .failed("\(error)") }
        }
        return outcome
    }

    /// Sends one line and reads its reply.
    @discardableResult
    public func send(_ line: String) throws(RecordsError) -> WireReply {
        try write(line + "\n")
        return try readReply()
    }

    /// AUTH, waiting its turn: the server checks only a few sign-ins of one user from one
    /// address at a time and answers the others UNAVAILABLE (try again once those are
    /// answered), which the many connections of one program, or of one host after a server
    /// stopped, meet at once. Tries for up to `patience` seconds; returns the last reply.
    public func signIn(user: String, password: String, patience: Double = 15) throws(RecordsError) -> WireReply {
        let deadline = Date().addingTimeInterval(patience)
        while true {
            let reply = try send("AUTH \(try user.recordsLiteral()) \(try password.recordsLiteral())")
            guard reply.code == .unavailable, Date() < deadline else { return reply }
            usleep(useconds_t.random(in: 50_000...200_000))
        }
    }

    /// Unblocks a read in progress on another thread (a watch stream ended); the owner closes.
    public func shutdownBoth() { _ = Glibc.shutdown(fd, Int32(SHUT_RDWR)) }

    public func close() {
        guard !closed else { return }
        closed = true
        tls?.shutdown()
        Glibc.close(fd)
    }
}
