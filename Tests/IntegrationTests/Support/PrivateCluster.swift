#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A PostgreSQL cluster of a test's own, for tests that stop and start it (the shared test
/// cluster must stay up for the others). Run as the `postgres` user when the tests run as root.
final class PrivateCluster {
    let directory: String
    private let binaries: String

    /// A unix socket in the cluster's own directory: no TCP port to collide with anything.
    var url: String { "postgresql:///postgres?host=\(directory)&user=postgres" }

    init() throws {
        let environment = ProcessInfo.processInfo.environment
        let candidates = [environment["RECORDSD_PG_BIN"]].compactMap { $0 }
            + ((try? FileManager.default.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []).sorted().reversed().map { "/usr/lib/postgresql/\($0)/bin" }
        guard let bin = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0 + "/initdb") }) else {
            throw TestFailure("no PostgreSQL server binaries (initdb) found")
        }
        binaries = bin
        directory = NSTemporaryDirectory() + "recordsd-private-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        if getuid() == 0, let user = getpwnam("postgres") {
            chown(directory, user.pointee.pw_uid, user.pointee.pw_gid)
        }
        try run("initdb", ["-D", directory + "/data", "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale"])
        try start()
    }

    func start() throws {
        try run("pg_ctl", ["-D", directory + "/data", "-l", directory + "/log", "-w", "-o",
                           "-c listen_addresses='' -c unix_socket_directories=\(directory) -c fsync=off", "start"])
    }

    func stop() throws {
        try run("pg_ctl", ["-D", directory + "/data", "-m", "fast", "-w", "stop"])
    }

    deinit {
        try? run("pg_ctl", ["-D", directory + "/data", "-m", "immediate", "-w", "stop"])
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// posix_spawn and waitpid: Foundation's Process did not reap `runuser` here once
    /// pg_ctl had left the postmaster running, and waited forever.
    private func run(_ tool: String, _ arguments: [String]) throws {
        let argv = (getuid() == 0 ? ["/usr/sbin/runuser", "-u", "postgres", "--"] : []) + [binaries + "/" + tool] + arguments
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, directory + "/tool.log", O_WRONLY | O_CREAT | O_APPEND, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        var pid: pid_t = 0
        let cArguments = argv.map { strdup($0) } + [nil]
        defer { cArguments.forEach { free($0) } }
        guard posix_spawn(&pid, argv[0], &actions, nil, cArguments, environ) == 0 else {
            throw TestFailure("cannot start \(tool)")
        }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        guard status == 0 else { throw TestFailure("\(tool) \(arguments) failed (status \(status))") }
    }
}
