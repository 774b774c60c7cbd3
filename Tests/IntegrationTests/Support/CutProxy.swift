#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A TCP proxy between recordsd and PostgreSQL that can cut a connection at the worst moment:
/// when it sees COMMIT go by. `.afterCommit` forwards the COMMIT, lets PostgreSQL run it, and
/// closes both sides before the answer comes back (the transaction committed, the client was
/// told nothing); `.beforeCommit` closes them without forwarding it (nothing committed).
final class CutProxy: @unchecked Sendable {  // `mode` and `cuts` guarded by `lock`
    enum Mode { case pass, afterCommit, beforeCommit }

    let port: Int
    private let target: (host: String, port: Int)
    private let listener: Int32
    private let lock = NSLock()
    private var mode = Mode.pass
    private(set) var cuts = 0
    private var stopped = false
    private var refusing = false

    /// While set, new connections are closed at once (PostgreSQL out of reach).
    func refuseConnections(_ refuse: Bool) {
        lock.lock()
        refusing = refuse
        lock.unlock()
    }

    init(to host: String, port targetPort: Int) throws {
        target = (host, targetPort)
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var one: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, listen(listener, 64) == 0 else { throw TestFailure("proxy: cannot listen") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) } }
        port = Int(UInt16(bigEndian: address.sin_port))
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    deinit {
        lock.lock()
        stopped = true
        lock.unlock()
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    /// A fresh database, and a proxy to its PostgreSQL: `through` is the URL that goes by the
    /// proxy (plain text, so the proxy reads COMMIT go by), `direct` the one that does not.
    static func toFreshDatabase() throws -> (proxy: CutProxy, through: String, direct: String) {
        let url = try TestEnvironment.freshDatabase()
        let components = URLComponents(string: url)!
        let proxy = try CutProxy(to: "127.0.0.1", port: components.port ?? 5432)
        var through = components
        through.port = proxy.port
        through.queryItems = [URLQueryItem(name: "sslmode", value: "disable")]
        return (proxy, through.string!, url)
    }

    /// Arms the next cut (one connection, once).
    func arm(_ mode: Mode) {
        lock.lock()
        self.mode = mode
        lock.unlock()
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            if client < 0 {
                lock.lock()
                let done = stopped
                lock.unlock()
                if done || errno == EBADF || errno == EINVAL { return }
                continue
            }
            lock.lock()
            let refuse = refusing
            lock.unlock()
            if refuse {
                close(client)
                continue
            }
            let server = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(target.port).bigEndian)
            inet_pton(AF_INET, target.host, &address.sin_addr)
            let connected = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(server, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
            guard connected == 0 else { close(client); close(server); continue }
            Thread { [self] in pump(client, server) }.start()
        }
    }

    /// Forwards both ways until either side closes, watching what the client sends for COMMIT.
    private func pump(_ client: Int32, _ server: Int32) {
        defer { close(client); close(server) }
        var buffer = [UInt8](repeating: 0, count: 65536)
        let commit = Array("COMMIT".utf8)
        while true {
            var fds = [pollfd(fd: client, events: Int16(POLLIN), revents: 0), pollfd(fd: server, events: Int16(POLLIN), revents: 0)]
            guard poll(&fds, 2, 1000) >= 0 else { return }
            if fds[0].revents != 0 {
                let n = recv(client, &buffer, buffer.count, 0)
                if n <= 0 { return }
                let chunk = Array(buffer[0..<n])
                lock.lock()
                let armed = mode
                let sawCommit = armed != .pass && chunk.indices.contains { i in i + commit.count <= chunk.count && Array(chunk[i..<(i + commit.count)]) == commit }
                if sawCommit { mode = .pass; cuts += 1 }
                lock.unlock()
                if sawCommit && armed == .beforeCommit { return }
                guard sendAll(server, chunk) else { return }
                if sawCommit && armed == .afterCommit {
                    usleep(500_000)  // PostgreSQL runs the COMMIT; its answer is never passed on
                    return
                }
            }
            if fds[1].revents != 0 {
                let n = recv(server, &buffer, buffer.count, 0)
                if n <= 0 { return }
                guard sendAll(client, Array(buffer[0..<n])) else { return }
            }
        }
    }

    private func sendAll(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { send(fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return false }
            offset += n
        }
        return true
    }
}
