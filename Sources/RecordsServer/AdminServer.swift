#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Records

/// `--admin-listen HOST:PORT`: what an operator's tools ask over HTTP, on a thread of its own
/// (never the event loop's): `GET /live` (the process answers), `GET /ready` (PostgreSQL
/// reachable and the server accepting), `GET /metrics` (Prometheus text). One request a
/// connection, answered and closed; anything else is 404 or 405.
public final class AdminServer: @unchecked Sendable {  // `stopping` guarded by `lock`; the rest immutable
    private let listener: Listener
    private let context: ServerContext
    private let databaseReady: @Sendable () -> Bool
    private let lock = NSLock()
    private var stopping = false

    /// The port bound (the one asked, or the one given for port 0).
    public var port: Int { listener.port }

    public init(host: String, port: Int, context: ServerContext, databaseReady: @escaping @Sendable () -> Bool) throws {
        listener = try Listener(host: host, port: port, backlog: 64)
        self.context = context
        self.databaseReady = databaseReady
    }

    /// `GET path` on an admin listener (`recordsd health`): the status line, nil when nothing
    /// answers within 3 s.
    public static func probe(host: String, port: Int, path: String) -> String? {
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
        let request = Array("GET \(path) HTTP/1.1\r\nHost: \(host)\r\nConnection: close\r\n\r\n".utf8)
        guard request.withUnsafeBytes({ send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }) == request.count else { return nil }
        var response: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        while !response.contains(10) {
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { break }
            response += buffer[0..<count]
        }
        let line = String(decoding: response.prefix { $0 != 13 && $0 != 10 }, as: UTF8.self)
        return line.isEmpty ? nil : line
    }

    /// From now on /ready fails: the server is draining (a balancer stops sending clients).
    public func markStopping() {
        lock.lock()
        stopping = true
        lock.unlock()
    }

    public func start() {
        let thread = Thread { [self] in
            while true {
                var poller = pollfd(fd: listener.fd, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, 1000) > 0, let client = try? listener.accept() else { continue }
                serve(client)
                close(client)
            }
        }
        thread.name = "admin"
        thread.start()
    }

    private func serve(_ fd: Int32) {
        var request: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 4096)
        // The request line and headers, at most 8 KiB, within 2 s.
        let deadline = Date().addingTimeInterval(2)
        while request.count < 8192, !request.containsHeaderEnd {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let left = Int32(max(0, deadline.timeIntervalSinceNow * 1000))
            guard left > 0, poll(&poller, 1, left) > 0 else { return }
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { return }
            request += buffer[0..<count]
        }
        let line = String(decoding: request.prefix { $0 != 13 && $0 != 10 }, as: UTF8.self).split(separator: " ")
        let (status, body, type) = answer(method: line.first.map(String.init) ?? "", path: line.count > 1 ? String(line[1]) : "")
        let response = "HTTP/1.1 \(status)\r\nContent-Type: \(type)\r\nContent-Length: \(body.utf8.count)\r\nConnection: close\r\n\r\n" + body
        var bytes = Array(response.utf8)[...]
        while !bytes.isEmpty {
            var poller = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            guard poll(&poller, 1, 2000) > 0 else { return }
            let sent = bytes.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard sent > 0 else { return }
            bytes = bytes.dropFirst(sent)
        }
    }

    func answer(method: String, path: String) -> (status: String, body: String, type: String) {
        guard method == "GET" || method == "HEAD" else { return ("405 Method Not Allowed", "GET only\n", "text/plain") }
        switch path.split(separator: "?").first.map(String.init) ?? path {
        case "/live":
            return ("200 OK", "live\n", "text/plain")
        case "/ready":
            lock.lock()
            let draining = stopping
            lock.unlock()
            if draining { return ("503 Service Unavailable", "stopping\n", "text/plain") }
            return databaseReady() ? ("200 OK", "ready\n", "text/plain") : ("503 Service Unavailable", "PostgreSQL unreachable\n", "text/plain")
        case "/metrics":
            let status = context.status
            var samples = [Metrics.Sample("recordsd_sessions", "Open client sessions.", Double(status.sessions))]
            if let pool = status.pool {
                samples += [Metrics.Sample("recordsd_pool_size", "PostgreSQL connections the pool may open.", Double(pool.size)),
                            Metrics.Sample("recordsd_pool_open", "PostgreSQL connections open.", Double(pool.open)),
                            Metrics.Sample("recordsd_pool_busy", "PostgreSQL connections running a job.", Double(pool.busy)),
                            Metrics.Sample("recordsd_pool_waiting", "Jobs waiting for a connection.", Double(pool.queued)),
                            Metrics.Sample("recordsd_pool_jobs_total", "Jobs the pool started.", type: "counter", Double(pool.started)),
                            Metrics.Sample("recordsd_pool_wait_seconds_total", "Seconds jobs waited for a connection, in all.", type: "counter", pool.waitSeconds)]
            }
            return ("200 OK", context.metrics.render(samples: samples), "text/plain; version=0.0.4")
        default:
            return ("404 Not Found", "try /live, /ready or /metrics\n", "text/plain")
        }
    }
}

private extension Array where Element == UInt8 {
    var containsHeaderEnd: Bool {
        guard count >= 4 else { return false }
        for index in 0...(count - 4) where self[index] == 13 && self[index + 1] == 10 && self[index + 2] == 13 && self[index + 3] == 10 {
            return true
        }
        return false
    }
}
