#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Postgres
import Records

/// `--admin-listen HOST:PORT`: what an operator's tools ask over HTTP, on a loop of its own
/// thread (never the client loop's): `GET /live` (the process answers), `GET /ready`
/// (PostgreSQL reachable and the server accepting), `GET /metrics` (Prometheus text);
/// anything else is 404 or 405. Connections are kept alive (HTTP/1.1), every socket is
/// non-blocking, a request has `requestSeconds` to arrive whole, and past `maxConnections` the
/// oldest idle connection is closed: idle or slow clients cannot keep a health check waiting.
/// Whether PostgreSQL answers is asked every second by a thread of its own, so `/ready` never
/// waits for a PostgreSQL that does not answer.
public final class AdminServer: @unchecked Sendable {  // `stopping`, `reachable` guarded by `lock`; the rest immutable
    private let listener: Listener
    private let context: ServerContext
    private let databaseReady: @Sendable () -> Bool
    /// `/sessions`: the board, and the token (`--admin-token-file`) a request must bear.
    private let board: SessionBoard?
    private let token: [UInt8]?
    private let lock = NSLock()
    private var stopping = false
    private var reachable = false

    /// The port bound (the one asked, or the one given for port 0).
    public var port: Int { listener.port }

    /// Binds `host:port` before anything else happens at start-up (a port in use fails fast),
    /// served once `AdminServer(reserved:...)` takes it.
    public struct Reservation: Sendable {
        let listener: Listener
        public init(host: String, port: Int) throws { listener = try Listener(host: host, port: port, backlog: 256) }
        public var port: Int { listener.port }
    }

    public init(reserved: Reservation, context: ServerContext, sessions: SessionBoard? = nil, token: String? = nil,
                databaseReady: @escaping @Sendable () -> Bool) {
        listener = reserved.listener
        self.context = context
        self.databaseReady = databaseReady
        self.board = sessions
        self.token = token.map { Array($0.utf8) }
    }

    public convenience init(host: String, port: Int, context: ServerContext, sessions: SessionBoard? = nil, token: String? = nil,
                databaseReady: @escaping @Sendable () -> Bool) throws {
        try self.init(reserved: Reservation(host: host, port: port), context: context, sessions: sessions, token: token,
                      databaseReady: databaseReady)
    }

    /// `GET path` on an admin listener (`recordsd health`): the status line, nil when nothing
    /// answers within 3 s.
    public static func probe(host: String, port: Int, path: String) -> String? {
        request(host: host, port: port, path: path).map(\.status)
    }

    /// `method path` on an admin listener, with the admin token when given: the status line
    /// and the body, nil when nothing answers within 3 s.
    public static func request(host: String, port: Int, method: String = "GET", path: String,
                               token: String? = nil) -> (status: String, body: String)? {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var info: UnsafeMutablePointer<addrinfo>?
        guard getaddrinfo(host, String(port), &hints, &info) == 0, let first = info else { return nil }
        defer { freeaddrinfo(info) }
        let fd = socket(first.pointee.ai_family, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var timeout = timeval(tv_sec: 3, tv_usec: 0)
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &timeout, socklen_t(MemoryLayout<timeval>.size))
        guard connect(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) == 0 else { return nil }
        let request = Array(("\(method) \(path) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n"
                             + (token.map { "Authorization: Bearer \($0)\r\n" } ?? "") + "\r\n").utf8)
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == request.count else { return nil }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while response.count < 64 << 20 {  // Connection: close: the answer ends with the connection
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { break }
            response += buffer[0..<count]
        }
        let line = String(decoding: response.prefix { $0 != 13 && $0 != 10 }, as: UTF8.self)
        guard !line.isEmpty else { return nil }
        return (line, AdminRequest.headEnd(response[...]).map { String(decoding: response[($0 + 4)...], as: UTF8.self) } ?? "")
    }

    /// From now on /ready fails: the server is draining (a balancer stops sending clients).
    public func markStopping() {
        lock.lock()
        stopping = true
        lock.unlock()
    }

    /// Connections open at once; a new one past it closes the oldest idle one (waiting for a
    /// request), so whoever opens idle connections cannot keep a health check out.
    static let maxConnections = 128
    /// A request must arrive whole within this long of its first byte, or of the connection's
    /// opening; an idle kept-alive connection is closed after `idleSeconds`.
    static let requestSeconds = 2.0
    static let idleSeconds = 10.0

    /// Serves the listener on a loop of its own thread (never the client loop): every
    /// connection non-blocking, each request read whole before it is answered.
    public func start() {
        lock.withLock { reachable = databaseReady() }
        let monitor = Thread { [self] in
            while true {
                sleep(1)
                let answered = databaseReady()
                lock.withLock { reachable = answered }
            }
        }
        monitor.name = "admin-ready"
        monitor.start()
        let thread = Thread { [self] in
            guard let loop = try? EventLoop<Never>() else {
                Log.error("admin listener: cannot start its event loop")
                return
            }
            let admin = AdminLoop(server: self, loop: loop, listener: listener)
            admin.run()
        }
        thread.name = "admin"
        thread.start()
    }

    /// Whether `authorization` is `Bearer` and the token (compared in constant time).
    private func authorised(_ authorization: String?) -> Bool {
        guard let token, let given = authorization, given.hasPrefix("Bearer ") else { return false }
        return Secret.equal(token, given.utf8.dropFirst(7))
    }

    /// `GET /sessions`, `POST /sessions/ID/kill`: only with the admin token.
    private func sessions(method: String, path: String, authorization: String?) -> (status: String, body: String, type: String) {
        guard let board, token != nil else {
            return ("403 Forbidden", "/sessions needs an admin token: start recordsd with --admin-token-file (RECORDSD_ADMIN_TOKEN_FILE)\n", "text/plain")
        }
        guard authorised(authorization) else { return ("401 Unauthorized", "send Authorization: Bearer and the admin token\n", "text/plain") }
        let parts = path.split(separator: "/")
        if parts == ["sessions"] {
            guard method == "GET" || method == "HEAD" else { return ("405 Method Not Allowed", "GET /sessions\n", "text/plain") }
            return ("200 OK", board.json(), "application/json")
        }
        guard parts.count == 3, parts[2] == "kill", let id = Int(parts[1]) else { return ("404 Not Found", "try GET /sessions or POST /sessions/ID/kill\n", "text/plain") }
        guard method == "POST" else { return ("405 Method Not Allowed", "POST /sessions/\(id)/kill\n", "text/plain") }
        return board.end(id) ? ("200 OK", "session \(id) is being ended\n", "text/plain") : ("404 Not Found", "no session \(id)\n", "text/plain")
    }

    func answer(method: String, path: String, authorization: String? = nil) -> (status: String, body: String, type: String) {
        let route = path.split(separator: "?").first.map(String.init) ?? path
        if route == "/sessions" || route.hasPrefix("/sessions/") { return sessions(method: method, path: route, authorization: authorization) }
        guard method == "GET" || method == "HEAD" else { return ("405 Method Not Allowed", "GET only\n", "text/plain") }
        switch route {
        case "/live":
            return ("200 OK", "live\n", "text/plain")
        case "/ready":
            lock.lock()
            let draining = stopping
            lock.unlock()
            if draining { return ("503 Service Unavailable", "stopping\n", "text/plain") }
            return lock.withLock({ reachable }) ? ("200 OK", "ready\n" + context.topology.summary + "\n", "text/plain") : ("503 Service Unavailable", "PostgreSQL unreachable\n", "text/plain")
        case "/metrics":
            let status = context.status
            var samples = [Metrics.Sample("recordsd_sessions", "Open client sessions.", Double(status.sessions))]
            if let pool = status.pool {
                samples += [Metrics.Sample("recordsd_pool_size", "PostgreSQL connections the pool may open.", Double(pool.size)),
                            Metrics.Sample("recordsd_pool_open", "PostgreSQL connections open.", Double(pool.open)),
                            Metrics.Sample("recordsd_pool_busy", "PostgreSQL connections running a job.", Double(pool.busy)),
                            Metrics.Sample("recordsd_pool_waiting", "Jobs waiting for a connection.", Double(pool.queued)),
                            Metrics.Sample("recordsd_pool_jobs_total", "Jobs the pool started.", type: "counter", Double(pool.waits.total)),
                            Metrics.Sample("recordsd_pool_waiting_for_server", "Pool workers waiting for a PostgreSQL that cannot be reached (a failover).",
                                           Double(pool.waitingForServer)),
                            Metrics.Sample("recordsd_pool_server_wait_seconds_total", "Seconds pool workers waited for a PostgreSQL that could not be reached (--failover-wait).",
                                           type: "counter", pool.serverWaitSeconds)]
            }
            let topology = context.topology
            if let look = topology.last {
                samples += [Metrics.Sample("recordsd_database_primary_changes_total", "Times PostgreSQL's primary changed address since start (failovers and switch-overs seen).",
                                           type: "counter", Double(topology.primaryChanges)),
                            Metrics.Sample("recordsd_database_standbys", "Standbys replicating from PostgreSQL's primary (0: a lone primary).", Double(look.standbys)),
                            Metrics.Sample("recordsd_database_synchronous_standbys", "Synchronous standbys of PostgreSQL's primary.", Double(look.synchronousStandbys))]
                if let lag = look.lagBytes {
                    samples.append(Metrics.Sample("recordsd_database_standby_replay_lag_bytes", "WAL bytes the slowest standby has yet to replay.", lag))
                }
            }
            let waits = status.pool.map { pool in
                Metrics.Waits(bounds: ConnectionPool.waitBuckets, histogram: pool.waits)
            }
            return ("200 OK", context.metrics.render(samples: samples, poolWaits: waits), "text/plain; version=0.0.4")
        default:
            return ("404 Not Found", "try /live, /ready or /metrics\n", "text/plain")
        }
    }
}

/// The admin listener's loop: its connections, confined to its thread.
private final class AdminLoop {
    struct Connection {
        var input: [UInt8] = []
        var output: [UInt8] = []
        var written = 0
        var keepAlive = false
        /// Uptime nanoseconds by which the request must be whole (or the idle one closes).
        var deadline: UInt64
        var opened: UInt64
        var isIdle: Bool { input.isEmpty && output.isEmpty }
    }

    private let server: AdminServer
    private let loop: EventLoop<Never>
    private let listener: Listener
    private var connections: [Int32: Connection] = [:]

    init(server: AdminServer, loop: EventLoop<Never>, listener: Listener) {
        self.server = server
        self.loop = loop
        self.listener = listener
    }

    private static func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }
    private static func after(_ seconds: Double) -> UInt64 { now() + UInt64(seconds * 1e9) }

    func run() {
        do {
            try loop.add(listener.fd, events: Readiness.readable) { [self] _ in acceptAll() }
        } catch {
            Log.error("admin listener: \(error)")
            return
        }
        sweep()
        loop.run(tickMilliseconds: 1000, tick: {}, receive: { _ in }, shouldStop: { false })
    }

    private func acceptAll() {
        while let fd = try? listener.accept() {
            if connections.count >= AdminServer.maxConnections {
                // The oldest idle connection makes room; with none idle, the newcomer waits no turn.
                guard let oldest = connections.filter({ $0.value.isIdle }).min(by: { $0.value.opened < $1.value.opened })?.key else {
                    Glibc.close(fd)
                    continue
                }
                drop(oldest)
            }
            let now = Self.now()
            connections[fd] = Connection(deadline: now + UInt64(AdminServer.idleSeconds * 1e9), opened: now)
            do {
                try loop.add(fd, events: Readiness.readable) { [self] events in ready(fd, events) }
            } catch {
                connections[fd] = nil
                Glibc.close(fd)
            }
        }
    }

    private func drop(_ fd: Int32) {
        loop.remove(fd)
        connections[fd] = nil
        Glibc.close(fd)
    }

    /// Closes connections past their deadline, four times a second.
    private func sweep() {
        let now = Self.now()
        for (fd, connection) in connections where connection.deadline < now { drop(fd) }
        loop.after(0.25) { [self] in sweep() }
    }

    private func ready(_ fd: Int32, _ events: UInt32) {
        guard var connection = connections[fd] else { return }
        if events & Readiness.hangup != 0 && events & Readiness.readable == 0 { return drop(fd) }
        if connection.output.isEmpty {
            var buffer = [UInt8](repeating: 0, count: 4096)
            while true {
                let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                if count > 0 {
                    if connection.input.isEmpty { connection.deadline = Self.after(AdminServer.requestSeconds) }
                    connection.input += buffer[0..<count]
                    if connection.input.count > AdminRequest.maxHead + 4096 { break }
                    continue
                }
                if count == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) { return drop(fd) }
                if errno == EINTR { continue }
                break
            }
            switch AdminRequest.parse(connection.input[...]) {
            case .incomplete:
                connections[fd] = connection
                return
            case .invalid(let status):
                connection.input = []
                connection.output = AdminRequest.response(status: status, type: "text/plain", body: "\(status)\n", keepAlive: false)
                connection.keepAlive = false
            case .request(let request, let consumed):
                connection.input.removeFirst(consumed)
                let (status, body, type) = server.answer(method: request.method, path: request.path, authorization: request.authorization)
                connection.output = AdminRequest.response(status: status, type: type, body: body, keepAlive: request.keepAlive,
                                                          head: request.method == "HEAD")
                connection.keepAlive = request.keepAlive
            }
            connection.written = 0
        }
        // Write what the answer has left; wait for writability if the socket is full.
        while connection.written < connection.output.count {
            let sent = connection.output[connection.written...].withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if sent > 0 { connection.written += sent; continue }
            if sent < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) {
                connections[fd] = connection
                loop.modify(fd, events: Readiness.writable)
                return
            }
            if sent < 0 && errno == EINTR { continue }
            return drop(fd)
        }
        guard connection.keepAlive else { return drop(fd) }
        connection.output = []
        connection.written = 0
        connection.deadline = Self.after(connection.input.isEmpty ? AdminServer.idleSeconds : AdminServer.requestSeconds)
        connections[fd] = connection
        loop.modify(fd, events: Readiness.readable)
        // A pipelined request already read is answered now.
        if !connection.input.isEmpty { loop.nextTurn { [self] in ready(fd, Readiness.readable) } }
    }
}
