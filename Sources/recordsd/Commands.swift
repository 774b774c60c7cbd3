#if canImport(Glibc)
import Glibc
#endif
import CSystem
import Foundation
import Postgres
import Records
import RecordsServer
import TLS

/// A configuration the server will not run with (exit status 1, the reason on stderr).
struct Refusal: Error, CustomStringConvertible {
    var description: String
}

/// Where the data lives for this run: a configured PostgreSQL or the embedded cluster.
struct Database {
    /// Where migrations and user management connect (the schema's owner).
    var conninfo: String
    var description: String
    var embedded: EmbeddedPostgres?
    /// Seconds `connect` waits for a PostgreSQL that does not answer yet (0: for ever).
    var startupTimeout = 60
    /// Where the server's pool and watcher connect: the same, except for the embedded cluster,
    /// whose superuser would bypass every row-level security policy; there it is a role
    /// that owns nothing (`EmbeddedPostgres.servingRole`).
    var serving: String { embedded?.servingConninfo ?? conninfo }

    /// The application's migrations this run applies: those of `--migrations`, else the
    /// sample domain for the embedded cluster only. A database the user names is never given
    /// ours unasked (recordsd's own schema is not a migration: `Migrator.migrate` makes it).
    func migrationFiles(_ options: Options) throws -> [MigrationFile] {
        if let directory = options.migrations { return try Migrator.load(directory: directory) }
        guard embedded != nil else { return [] }
        guard FileManager.default.fileExists(atPath: "./migrations") else {
            Log.info("no ./migrations here and no --migrations: the embedded cluster gets no tables of a sample domain")
            return []
        }
        return try Migrator.load(directory: "./migrations")
    }

    static func resolve(_ options: Options, environment: [String: String]) throws -> Database {
        if let url = options.database {
            // A URL of another scheme is no address of PostgreSQL's (libpq would take it for
            // key=value text and name a socket nobody gave).
            if let separator = url.range(of: "://") {
                let scheme = url[..<separator.lowerBound].lowercased()
                guard scheme == "postgresql" || scheme == "postgres" else {
                    throw Refusal(description: "cannot connect to PostgreSQL: unknown scheme '\(url[..<separator.lowerBound].prefix(40))' in the database URL (use postgresql:// or postgres://, or libpq's key=value form)")
                }
            }
            return Database(conninfo: url, description: Options.redacted(url), embedded: nil, startupTimeout: options.startupTimeout)
        }
        if Options.hasLibpqEnvironment(environment) {
            let where_ = [environment["PGHOST"], environment["PGPORT"], environment["PGDATABASE"]].compactMap { $0 }.joined(separator: " ")
            return Database(conninfo: "", description: "PG* environment (\(where_))", embedded: nil, startupTimeout: options.startupTimeout)
        }
        var embedded = try EmbeddedPostgres(directory: options.dataDirectory)
        try embedded.start()
        return Database(conninfo: embedded.conninfo, description: embedded.description, embedded: embedded, startupTimeout: options.startupTimeout)
    }

    /// Connects, waiting up to `startupTimeout` seconds (0: for ever) for PostgreSQL to accept
    /// connections (containers often start before their database is ready).
    func connect() throws -> Connection {
        let deadline = startupTimeout == 0 ? Date.distantFuture : Date().addingTimeInterval(Double(startupTimeout))
        var warned = false
        while true {
            let result = Result { () throws(PostgresError) -> Connection in try Connection(conninfo) }
            switch result {
            case .success(let connection): return connection
            case .failure(let error):
                // Only a server that does not answer (yet) is worth waiting for: one that
                // answers and refuses (password, database, role) or a malformed address will
                // not change by itself.
                if Conninfo.isMalformed(conninfo) {
                    throw Refusal(description: "cannot connect to PostgreSQL: the address is malformed (\(error.message))")
                }
                switch Connection.ping(conninfo) {
                case .accepting: throw Refusal(description: "PostgreSQL (\(description)) refused the connection: \(error.message)")
                case .badParameters: throw Refusal(description: "cannot connect to PostgreSQL: the address is malformed (\(error.message))")
                case .rejecting, .noResponse: break
                }
                guard error.isUnavailable else { throw error }
                guard Date() < deadline else {
                    throw Refusal(description: "PostgreSQL (\(description)) did not answer within \(startupTimeout) s: \(error.message) (is it running and reachable? --startup-timeout sets the wait, 0 waits for ever)")
                }
                if !warned {
                    Log.warning("waiting for PostgreSQL (\(description)), at most \(startupTimeout == 0 ? "for ever" : "\(startupTimeout) s"): \(error.message)")
                    warned = true
                }
                if let signal = Signals.stopRequested(within: 1) {
                    throw Refusal(description: "signal \(signal) while waiting for PostgreSQL: stopped")
                }
            }
        }
    }
}

struct MigrateCommand {
    var options: Options
    var statusOnly: Bool

    func run(environment: [String: String]) throws {
        let database = try Database.resolve(options, environment: environment)
        defer { database.embedded?.stop() }
        let connection = try database.connect()
        if options.migrations == nil && database.embedded == nil && statusOnly {
            throw UsageError(description: "migrate status needs --migrations DIR (RECORDSD_MIGRATIONS): the files to compare with what was applied")
        }
        let files = try database.migrationFiles(options)
        if statusOnly {
            let rows = try Migrator.status(files, connection: connection)
            for row in rows {
                let state: String
                switch row.state {
                case .applied(let at): state = "applied \(at)"
                case .pending: state = "pending"
                case .changed: state = "CHANGED since applied"
                case .missingFile: state = "applied, but its file is missing"
                }
                print(String(format: "%04d", row.version) + "  " + row.name.padding(toLength: 28, withPad: " ", startingAt: 0) + "  " + state)
            }
            // A changed or missing applied file stops start-up: the status says so by its exit code too.
            if rows.contains(where: { if case .changed = $0.state { true } else if case .missingFile = $0.state { true } else { false } }) {
                throw Refusal(description: "applied migrations differ from their files (see above): restore them and add new migrations instead")
            }
            return
        }
        let applied = try Migrator.migrate(files, connection: connection, schema: options.schema)
        if files.isEmpty && options.migrations == nil {
            print("recordsd's own schema is in place; no migrations applied (none given: --migrations DIR)")
            return
        }
        print(applied.isEmpty ? "up to date: \(files.count) migration(s) applied before" : "applied \(applied.count) migration(s): " + applied.map { String(format: "%04d_", $0.version) + $0.name }.joined(separator: ", "))
    }
}

/// `recordsd user add|passwd|remove|list`.
struct UserCommandLine {
    var options: Options
    var arguments: [String]

    func run(environment: [String: String]) throws {
        let database = try Database.resolve(options, environment: environment)
        defer { database.embedded?.stop() }
        let connection = try database.connect()
        // The server's own schema (users, pgcrypto), never the application's migrations; a role
        // without DDL rights (--no-migrate) relies on the owner having made it.
        if options.migrate { try Migrator.bootstrap(connection) }
        do {
            switch arguments {
            case ["list"]:
                let accounts = try Users.list(connection)
                if accounts.isEmpty { print("no users: authentication is off (loopback only)") }
                for account in accounts { print("\(account.name)  \(account.role.name)  created \(account.createdAt)") }
            case let args where args.count == 2 && args[0] == "add":
                guard let role = options.role else { throw UsageError(description: "user add needs --role reader|writer|admin") }
                try Users.add(args[1], role: role, password: try environment["RECORDS_ADMIN_PASSWORD"] ?? readPassword(confirm: true),
                              databaseRole: options.databaseRole, connection)
                print("user \(args[1]) added (\(role.name)); authentication is now required")
            case let args where args.count == 2 && args[0] == "passwd":
                try Users.setPassword(args[1], password: try environment["RECORDS_ADMIN_PASSWORD"] ?? readPassword(confirm: true), connection)
                print("password of \(args[1]) changed")
            case let args where args.count == 2 && args[0] == "remove":
                try Users.remove(args[1], connection)
                print("user \(args[1]) removed")
            default:
                throw UsageError(description: "user takes: add NAME --role ROLE | passwd NAME | remove NAME | list")
            }
        } catch let error as UserError {
            throw UsageError(description: error.description)
        }
    }

    /// From a prompt without echo on a terminal, else the first line of stdin.
    private func readPassword(confirm: Bool) throws -> String {
        guard isatty(STDIN_FILENO) == 1 else {
            guard let line = readLine(strippingNewline: true), !line.isEmpty else {
                throw UsageError(description: "no password on stdin")
            }
            return line
        }
        let first = try prompt("password: ")
        if confirm, try prompt("again: ") != first { throw UsageError(description: "the passwords differ") }
        return first
    }

    private func prompt(_ text: String) throws -> String {
        FileHandle.standardError.write(text.data(using: .utf8)!)
        var original = termios()
        tcgetattr(STDIN_FILENO, &original)
        var silent = original
        silent.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(STDIN_FILENO, TCSANOW, &silent)
        defer {
            tcsetattr(STDIN_FILENO, TCSANOW, &original)
            FileHandle.standardError.write("\n".data(using: .utf8)!)
        }
        guard let line = readLine(strippingNewline: true) else { throw UsageError(description: "no password given") }
        return line
    }
}

/// `recordsd uninstall [--yes]`: removes what recordsd installed in a database — its schema
/// `records` (users, save keys and marks, hand-offs, the change log, pgcrypto when recordsd
/// made it there) and the change-feed triggers on the served tables — and nothing of the
/// application's. Without `--yes` it says what it would drop.
struct UninstallCommand {
    var options: Options

    func run(environment: [String: String]) throws {
        let database = try Database.resolve(options, environment: environment)
        defer { database.embedded?.stop() }
        let connection = try database.connect()
        guard try Uninstall.isInstalled(connection) else {
            print("recordsd is not installed in this database: nothing to remove")
            return
        }
        // Run in full either way: without --yes it is rolled back, so what it says is exactly
        // what --yes would do.
        let report = try Uninstall.run(connection, commit: options.confirmed)
        if let blocker = report.blocker { throw Refusal(description: "nothing was removed: " + blocker) }
        for line in report.dropped { print((options.confirmed ? "dropped " : "would drop ") + line) }
        guard options.confirmed else {
            throw Refusal(description: "nothing was removed: run again with --yes to remove it (stop every recordsd first)")
        }
        print("recordsd is removed; the application's tables and rows are as they were")
    }
}
