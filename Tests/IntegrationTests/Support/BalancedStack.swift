#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A deployment's shape on loopback: HAProxy in TCP mode in front of two `recordsd`, and
/// PgBouncer in session pooling between them and PostgreSQL (Debian's `haproxy` and
/// `pgbouncer`, which scripts/test installs). Replicas listen on fixed ports, so one can be
/// stopped and started again where the balancer expects it.
final class BalancedStack {
    let directory: String
    let databaseURL: String
    let throughBouncer: String
    let balancerPort: Int
    let replicaPorts: [Int]
    let arguments: [String]
    private(set) var replicas: [TestServer?] = [nil, nil]
    private let pgbouncer = Process()
    private let haproxy = Process()

    init(arguments: [String] = []) throws {
        for binary in ["/usr/sbin/haproxy", "/usr/sbin/pgbouncer"] where !FileManager.default.isExecutableFile(atPath: binary) {
            throw TestFailure("\(binary) is not installed: scripts/test installs haproxy and pgbouncer (apt-get install haproxy pgbouncer)")
        }
        self.arguments = arguments
        directory = NSTemporaryDirectory() + "recordsd-stack-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o777])
        databaseURL = try TestEnvironment.freshDatabase()
        guard let direct = URLComponents(string: databaseURL), let pgHost = direct.host, let pgPort = direct.port else {
            throw TestFailure("DATABASE_URL must be a postgresql:// URL with a host and port: \(databaseURL)")
        }
        let bouncerPort = try freeLoopbackPort()
        balancerPort = try freeLoopbackPort()
        replicaPorts = [try freeLoopbackPort(), try freeLoopbackPort()]

        // PgBouncer: session pooling (recordsd keeps settings, prepared statements, LISTEN).
        let user = direct.user ?? "postgres"
        try "\"\(user)\" \"\(direct.password ?? "")\"\n".write(toFile: directory + "/userlist.txt", atomically: true, encoding: .utf8)
        try Self.template("pgbouncer.ini.in", ["PG_HOST": pgHost, "PG_PORT": "\(pgPort)", "BOUNCER_PORT": "\(bouncerPort)", "DIR": directory])
            .write(toFile: directory + "/pgbouncer.ini", atomically: true, encoding: .utf8)
        if getuid() == 0 {
            // PgBouncer refuses to run as root.
            pgbouncer.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
            pgbouncer.arguments = ["-u", "postgres", "--", "/usr/sbin/pgbouncer", directory + "/pgbouncer.ini"]
        } else {
            pgbouncer.executableURL = URL(fileURLWithPath: "/usr/sbin/pgbouncer")
            pgbouncer.arguments = [directory + "/pgbouncer.ini"]
        }
        pgbouncer.standardOutput = FileHandle.nullDevice
        pgbouncer.standardError = FileHandle.nullDevice
        try pgbouncer.run()
        var bounced = direct
        bounced.port = bouncerPort
        throughBouncer = bounced.string!
        _ = eventually(tries: 100, { canConnect(port: bouncerPort) }, until: { $0 })

        // HAProxy: TCP, a connection stays on its server; a stopping server closes its
        // listener at once, so the check and redispatch send new connections to the other.
        try Self.template("haproxy.cfg.in", ["BALANCER_PORT": "\(balancerPort)", "REPLICA_PORT_0": "\(replicaPorts[0])", "REPLICA_PORT_1": "\(replicaPorts[1])"])
            .write(toFile: directory + "/haproxy.cfg", atomically: true, encoding: .utf8)
        for index in 0..<2 { try start(index) }
        haproxy.executableURL = URL(fileURLWithPath: "/usr/sbin/haproxy")
        haproxy.arguments = ["-db", "-f", directory + "/haproxy.cfg"]
        haproxy.standardOutput = FileHandle.nullDevice
        haproxy.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: directory + "/haproxy.log", isDirectory: false).creatingFile())
        try haproxy.run()
        _ = eventually(tries: 100, { canConnect(port: self.balancerPort) }, until: { $0 })
    }

    /// A file of scripts/local-stack with its `@NAME@`s filled in (bench/rolling_restart.sh
    /// fills the same files).
    static func template(_ name: String, _ values: [String: String]) throws -> String {
        var text = try String(contentsOfFile: TestEnvironment.root + "/scripts/local-stack/" + name, encoding: .utf8)
        for (key, value) in values { text = text.replacingOccurrences(of: "@\(key)@", with: value) }
        return text
    }

    /// Starts replica `index` on its port, through PgBouncer; returns once it listens.
    func start(_ index: Int) throws {
        replicas[index] = try TestServer(databaseURL: throughBouncer, arguments: ["--listen", "127.0.0.1:\(replicaPorts[index])", "--proxy-from", "127.0.0.1"] + arguments)
    }

    /// Stops replica `index` (SIGTERM: its sessions are handed off; SIGKILL: a crash) and
    /// waits for it to exit.
    func stop(_ index: Int, signal: Int32 = SIGTERM) {
        guard let server = replicas[index] else { return }
        kill(server.process.processIdentifier, signal)
        server.process.waitUntilExit()
        replicas[index] = nil
    }

    /// A client of the balancer, from `source` (another client host on loopback).
    func client(from source: String? = nil) throws -> LineClient { try LineClient(port: balancerPort, source: source) }

    /// The URL RecordsClient connects to.
    var url: String { "records://127.0.0.1:\(balancerPort)" }

    deinit {
        for index in 0..<2 { stop(index, signal: SIGKILL) }
        for process in [haproxy, pgbouncer] where process.isRunning {
            kill(process.processIdentifier, SIGTERM)
            process.waitUntilExit()
        }
        if ProcessInfo.processInfo.environment["RECORDS_KEEP_STACK"] == nil { try? FileManager.default.removeItem(atPath: directory) }
    }
}

/// A loopback port nothing listens on now (taken by binding port 0, then let go).
func freeLoopbackPort() throws -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = 0
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, length) == 0 && getsockname(fd, $0, &length) == 0 }
    }
    guard bound else { throw TestFailure("no free loopback port") }
    return Int(UInt16(bigEndian: address.sin_port))
}

/// Whether something accepts connections on the loopback port.
func canConnect(port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = UInt16(port).bigEndian
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0 }
    }
}

private extension URL {
    /// The file, created empty first (FileHandle(forWritingTo:) needs one).
    func creatingFile() -> URL {
        FileManager.default.createFile(atPath: path, contents: nil)
        return self
    }
}
