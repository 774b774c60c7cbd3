#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Postgres
import Records

/// The private PostgreSQL cluster used when no database is configured: initdb + pg_ctl into
/// `<data-dir>/pgdata`, listening only on a unix socket in `<data-dir>`, run as the `postgres`
/// user when recordsd runs as root (PostgreSQL refuses to run as root).
struct EmbeddedPostgres {
    struct Failure: Error, CustomStringConvertible { var description: String }

    let directory: String
    let binaries: String
    /// The OS user that owns the cluster when we are root.
    let runAs: String?
    var startedHere = false

    var dataPath: String { directory + "/pgdata" }
    var logPath: String { directory + "/postgres.log" }
    var conninfo: String { "host=\(directory) port=5432 user=postgres dbname=records" }
    var description: String { "embedded PostgreSQL in \(directory) (unix socket)" }
    /// The role the server serves as: it reads and writes the data, owns nothing, and so is
    /// bound by row-level security (the superuser `postgres` owns the schema and migrates it).
    static let servingRole = "records_app"
    var servingConninfo: String { "host=\(directory) port=5432 user=\(Self.servingRole) dbname=records" }

    /// Creates the serving role if needed and grants it the data of `schema` and recordsd's
    /// own schema, now and as migrations add to them (as docker/postgres/app-role.sql does).
    func grantServingRole(_ owner: Connection, schema: String) throws {
        try ServingRole.grant(owner, role: Self.servingRole, schema: schema, database: "records")
    }

    init(directory: String) throws {
        let absolute = directory.hasPrefix("/") ? directory : FileManager.default.currentDirectoryPath + "/" + directory
        self.directory = URL(fileURLWithPath: absolute).standardizedFileURL.path
        guard let binaries = Self.findBinaries() else {
            throw Failure(description: "no PostgreSQL server binaries found (initdb, pg_ctl): install them with `apt-get install postgresql`, set RECORDSD_PG_BIN, or pass --database URL")
        }
        self.binaries = binaries
        self.runAs = getuid() == 0 ? "postgres" : nil
        if let user = runAs, getpwnam(user) == nil {
            throw Failure(description: "recordsd runs as root, and PostgreSQL refuses root: create a `\(user)` user (apt-get install postgresql does) or run as another user")
        }
    }

    static func findBinaries() -> String? {
        let manager = FileManager.default
        if let configured = ProcessInfo.processInfo.environment["RECORDSD_PG_BIN"] { return configured }
        let versions = (try? manager.contentsOfDirectory(atPath: "/usr/lib/postgresql")) ?? []
        for version in versions.sorted(by: { (Int($0) ?? 0) > (Int($1) ?? 0) }) {
            let bin = "/usr/lib/postgresql/\(version)/bin"
            if manager.isExecutableFile(atPath: bin + "/initdb") { return bin }
        }
        for dir in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") where manager.isExecutableFile(atPath: dir + "/initdb") {
            return String(dir)
        }
        return nil
    }

    /// Creates the cluster on first use, starts it, and makes sure the `records` database exists.
    mutating func start() throws {
        let manager = FileManager.default
        try manager.createDirectory(atPath: directory, withIntermediateDirectories: true)
        chmod(directory, 0o700)
        if let user = runAs, let entry = getpwnam(user) {
            chown(directory, entry.pointee.pw_uid, entry.pointee.pw_gid)
        }
        if !manager.fileExists(atPath: dataPath + "/PG_VERSION") {
            Log.info("creating the embedded PostgreSQL cluster in \(dataPath)")
            try run("initdb", ["-D", dataPath, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-locale"], what: "initdb")
        }
        if (try? run("pg_ctl", ["-D", dataPath, "status"], what: "pg_ctl status", quiet: true)) != nil {
            Log.info("the embedded PostgreSQL is already running; using it")
        } else {
            let options = "-c listen_addresses='' -c unix_socket_directories='\(directory)' -c unix_socket_permissions=0700 -c port=5432"
            try run("pg_ctl", ["-D", dataPath, "-l", logPath, "-w", "-t", "60", "-o", options, "start"], what: "starting PostgreSQL")
            startedHere = true
        }
        try DatabaseCreation.createIfMissing("records", conninfo: "host=\(directory) port=5432 user=postgres dbname=postgres")
    }

    /// Stops the cluster if this process started it.
    func stop() {
        guard startedHere else { return }
        Log.info("stopping the embedded PostgreSQL")
        _ = try? run("pg_ctl", ["-D", dataPath, "-m", "fast", "-w", "stop"], what: "pg_ctl stop", quiet: true)
    }

    /// Runs a PostgreSQL tool to completion, its output captured through a file (the
    /// postmaster that pg_ctl starts would hold a pipe open for its whole life). posix_spawn and
    /// waitpid, not Foundation's Process: measured here, Process never reaped `runuser` once
    /// pg_ctl had left the postmaster running, and waited forever.
    @discardableResult
    private func run(_ tool: String, _ arguments: [String], what: String, quiet: Bool = false) throws -> String {
        let executable = binaries + "/" + tool
        // As the postgres user, start in the cluster's directory: it may not reach ours.
        let argv = (runAs.map { ["/usr/sbin/runuser", "-u", $0, "--", "/usr/bin/env", "-C", directory] } ?? []) + [executable] + arguments
        let capturePath = directory + "/.tool-output"
        defer { try? FileManager.default.removeItem(atPath: capturePath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, capturePath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_adddup2(&actions, 1, 2)
        let cArguments = argv.map { strdup($0) } + [nil]
        defer { cArguments.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, argv[0], &actions, nil, cArguments, environ)
        guard spawned == 0 else { throw Failure(description: "\(what): cannot run \(argv[0]): \(String(cString: strerror(spawned)))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        let output = (try? String(contentsOfFile: capturePath, encoding: .utf8)) ?? ""
        guard status == 0 else {
            if quiet { throw Failure(description: output) }
            var message = "\(what) failed (status \(status >> 8)): \(output.trimmingCharacters(in: .whitespacesAndNewlines))"
            if let log = try? String(contentsOfFile: logPath, encoding: .utf8), tool == "pg_ctl" {
                message += "\nlast lines of \(logPath):\n" + log.split(separator: "\n").suffix(10).joined(separator: "\n")
            }
            if let user = runAs { message += "\n(the \(user) user needs to reach \(directory): every parent directory must be searchable by it)" }
            throw Failure(description: message)
        }
        return output
    }
}
