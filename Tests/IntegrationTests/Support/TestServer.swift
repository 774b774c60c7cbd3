#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Postgres

/// A real `recordsd` process on a free loopback port, against a database of the test cluster.
final class TestServer {
    let process = Process()
    let databaseURL: String
    private(set) var port = 0
    /// The `--tls-listen` port, when one was asked for.
    private(set) var tlsPort = 0
    let logPath: String
    /// What the server wrote on stdout until it listened (`recordsd listening on ...`).
    private(set) var startupOutput = ""

    /// Starts `recordsd serve` on 127.0.0.1 with a free port and waits until it listens.
    /// - Parameter fileLimit: the server's limit of open descriptors (`ulimit -n`).
    /// - Parameter migrations: the folder `--migrations` names; nil: none given.
    init(databaseURL: String? = nil, arguments: [String] = [], environment: [String: String] = [:], fileLimit: Int? = nil,
         migrations: String? = TestEnvironment.migrations) throws {
        self.databaseURL = try databaseURL ?? TestEnvironment.freshDatabase()
        logPath = NSTemporaryDirectory() + "recordsd-test-\(UUID().uuidString).log"
        _ = FileManager.default.createFile(atPath: logPath, contents: nil)
        let serve = ["serve", "--listen", "127.0.0.1:0", "--database", self.databaseURL]
            + (migrations.map { ["--migrations", $0] } ?? []) + ["--pool-size", "3"] + arguments
        if let fileLimit {
            process.executableURL = URL(fileURLWithPath: "/bin/sh")
            process.arguments = ["-c", "ulimit -n \(fileLimit) && exec \"$0\" \"$@\"", TestEnvironment.recordsdBinary] + serve
        } else {
            process.executableURL = URL(fileURLWithPath: TestEnvironment.recordsdBinary)
            process.arguments = serve
        }
        var env = ProcessInfo.processInfo.environment
        env["DATABASE_URL"] = nil
        for (key, value) in environment { env[key] = value }
        process.environment = env
        let output = Pipe()
        process.standardOutput = output
        process.standardError = try FileHandle(forWritingTo: URL(fileURLWithPath: logPath))
        try process.run()
        // The server prints "recordsd listening on HOST:PORT" once ready.
        let reader = output.fileHandleForReading
        var text = ""
        let deadline = Date().addingTimeInterval(30)
        while Date() < deadline {
            // Waits at most until the deadline: a server stuck before it listens (a lock wait
            // at start) fails the test instead of hanging it.
            var descriptor = pollfd(fd: reader.fileDescriptor, events: Int16(POLLIN), revents: 0)
            if poll(&descriptor, 1, Int32(max(1, deadline.timeIntervalSinceNow * 1000))) == 0 { break }
            let data = reader.availableData
            if data.isEmpty { break }
            text += String(decoding: data, as: UTF8.self)
            // `recordsd listening on HOST:PORT`, as text or inside a JSON line (--log-format json).
            func portAfter(_ marker: String) -> Int? {
                guard let line = text.split(separator: "\n").first(where: { $0.contains(marker) }),
                      let range = line.range(of: marker) else { return nil }
                let address = line[range.upperBound...].prefix { $0 != "\"" && $0 != " " }
                return Int(address.split(separator: ":").last ?? "")
            }
            if let port = portAfter("listening on ") {
                self.port = port
                startupOutput = text
                guard arguments.contains("--tls-listen") else { return }
                // With a TLS listener, its line follows.
                if let tlsPort = portAfter("listening for TLS on ") {
                    self.tlsPort = tlsPort
                    return
                }
            }
        }
        process.terminate()
        throw TestFailure("recordsd did not start: \(text)\n\(log)")
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// The server's resident memory now, in MiB (from /proc).
    var residentMiB: Double {
        let status = (try? String(contentsOfFile: "/proc/\(process.processIdentifier)/status", encoding: .utf8)) ?? ""
        guard let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") }),
              let kilobytes = Double(line.split(separator: " ").dropFirst().first ?? "") else { return 0 }
        return kilobytes / 1024
    }

    func client(from source: String? = nil) throws -> LineClient {
        let client = try LineClient(port: port, source: source)
        client.owner = self
        return client
    }

    /// SIGTERM, then wait; returns the exit status.
    @discardableResult
    func stop() -> Int32 {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
        return process.terminationStatus
    }

    /// A direct connection to the server's database, to check what really is there.
    func database() throws -> Connection { try Connection(databaseURL) }

    /// A server whose model holds the tables `ddl` makes (read again on SIGHUP), a connection
    /// to its database, and a client that sees `table` (and keeps the server running).
    static func serving(_ ddl: String, table: String) throws -> (server: TestServer, db: Connection, client: LineClient) {
        let server = try TestServer()
        let db = try server.database()
        try db.execute(ddl)
        kill(server.process.processIdentifier, SIGHUP)
        let client = try server.client()
        _ = try eventually({ try client.send("DESCRIBE \(table)") }, until: { $0.ok })
        return (server, db, client)
    }

    deinit {
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
        try? FileManager.default.removeItem(atPath: logPath)
    }
}

/// Runs `recordsd` with arguments to completion (migrate, migrate status, --help).
func runRecordsd(_ arguments: [String], environment: [String: String] = [:], input: String? = nil) throws -> (status: Int32, output: String, error: String) {
    try runProcess(TestEnvironment.recordsdBinary, arguments, environment: ["DATABASE_URL": nil].merging(environment.mapValues { Optional($0) }) { $1 }, input: input)
}

/// Runs a program to completion with stdin from `input`; `environment` values of nil unset.
func runProcess(_ binary: String, _ arguments: [String], environment: [String: String?] = [:], input: String? = nil) throws -> (status: Int32, output: String, error: String) {
    let process = Process()
    process.executableURL = URL(fileURLWithPath: binary)
    process.arguments = arguments
    var env = ProcessInfo.processInfo.environment
    for (key, value) in environment { env[key] = value }
    process.environment = env
    let out = Pipe(), err = Pipe(), stdin = Pipe()
    process.standardOutput = out
    process.standardError = err
    process.standardInput = input == nil ? FileHandle.nullDevice : stdin
    try process.run()
    if let input {
        stdin.fileHandleForWriting.write(input.data(using: .utf8)!)
        try stdin.fileHandleForWriting.close()
    }
    let outData = out.fileHandleForReading.readDataToEndOfFile()
    let errData = err.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    return (process.terminationStatus, String(decoding: outData, as: UTF8.self), String(decoding: errData, as: UTF8.self))
}
