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
    /// Where the server's pool and watcher connect: the same, except for the embedded cluster,
    /// whose superuser would bypass every row-level security policy; there it is a role
    /// that owns nothing (`EmbeddedPostgres.servingRole`).
    var serving: String { embedded?.servingConninfo ?? conninfo }

    static func resolve(_ options: Options, environment: [String: String]) throws -> Database {
        if let url = options.database {
            return Database(conninfo: url, description: Options.redacted(url), embedded: nil)
        }
        if Options.hasLibpqEnvironment(environment) {
            let where_ = [environment["PGHOST"], environment["PGPORT"], environment["PGDATABASE"]].compactMap { $0 }.joined(separator: " ")
            return Database(conninfo: "", description: "PG* environment (\(where_))", embedded: nil)
        }
        var embedded = try EmbeddedPostgres(directory: options.dataDirectory)
        try embedded.start()
        return Database(conninfo: embedded.conninfo, description: embedded.description, embedded: embedded)
    }

    /// Connects, waiting up to `seconds` for PostgreSQL to accept connections (containers
    /// often start before their database is ready).
    func connect(waiting seconds: Int = 30) throws -> Connection {
        var attempt = 0
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
                guard error.isUnavailable, attempt < seconds else { throw error }
                if attempt == 0 { Log.warning("waiting for PostgreSQL (\(description)): \(error.message)") }
                attempt += 1
                if let signal = Signals.stopRequested(within: 1) {
                    throw Refusal(description: "signal \(signal) while waiting for PostgreSQL: stopped")
                }
            }
        }
    }
}

struct ServeCommand {
    var options: Options

    func run(environment: [String: String]) throws {
        // The ports first: one in use stops the server before it changes anything.
        let reserved = try Server.Reservation(host: options.listenHost, port: options.listenPort)
        let reservedTLS = try options.tlsListen.map { try Server.Reservation(host: $0.host, port: $0.port) }
        let database = try Database.resolve(options, environment: environment)
        defer { database.embedded?.stop() }
        let admin = try database.connect()
        if options.migrate {
            let files = try Migrator.load(directory: options.migrations)
            let applied = try Migrator.migrate(files, connection: admin, schema: options.schema)
            Log.info(applied.isEmpty ? "migrations up to date (\(files.count))" : "applied \(applied.count) migration(s)")
        }
        if let embedded = database.embedded { try embedded.grantServingRole(admin, schema: options.schema) }
        let model = try ModelReflector.reflect(admin, schema: options.schema)
        let roles = (try? Users.roles(admin)) ?? [:]
        let guarded = model.entities.filter(\.hasRowSecurity).map(\.name)
        if !guarded.isEmpty, let serving = try? (database.embedded == nil ? admin : Connection(database.serving)),
           let bypass = try? serving.query("SELECT rolsuper, rolbypassrls FROM pg_roles WHERE rolname = current_user"),
           bypass.bool(0, 0) == true || bypass.bool(0, 1) == true {
            let kind = bypass.bool(0, 0) == true ? "a superuser" : "a BYPASSRLS role"
            Log.warning("connected to PostgreSQL as \(kind): the row-level security policies of \(guarded.joined(separator: ", ")) are ignored and every user reads and writes every record; connect as an ordinary role (see README, Per-user records)")
        }
        let users = roles.count
        admin.close()
        if !options.listensOnLoopback && users == 0 && !options.insecureNoAuth {
            throw Refusal(description: """
                refusing to listen on \(options.listenHost) without authentication: anyone who can reach it could read and change the data.
                Create a user first (authentication is then required of every session):
                  recordsd user add admin --role admin --database ...
                or, if a firewall really stands in front, pass --insecure-no-auth.
                """)
        }
        if options.insecureNoAuth {
            Log.warning("--insecure-no-auth: serving \(options.listenHost) WITHOUT AUTHENTICATION; anyone who reaches it can read and change everything")
        }
        // TLS: a certificate and its key, both or neither.
        let tls: TLSContext?
        switch (options.tlsCert, options.tlsKey) {
        case (let cert?, let key?): tls = try TLSContext.server(certificateFile: cert, keyFile: key)
        case (nil, nil): tls = nil
        default: throw UsageError(description: "--tls-cert and --tls-key go together")
        }
        if options.tlsListen != nil && tls == nil {
            throw UsageError(description: "--tls-listen needs --tls-cert and --tls-key")
        }
        if !options.listensOnLoopback && tls == nil && !options.insecureNoTLS {
            throw Refusal(description: """
                refusing to listen on \(options.listenHost) without TLS: passwords and data would cross the network in clear.
                Give a certificate and its key (--tls-cert FILE --tls-key FILE), or, if the network
                really is private (a TLS-terminating proxy in front), pass --insecure-no-tls.
                """)
        }
        if options.insecureNoTLS && !options.listensOnLoopback {
            Log.warning("--insecure-no-tls: serving \(options.listenHost) without TLS; AUTH from other hosts is accepted in clear")
        }
        Log.info("serving \(model.entities.count) entities from schema \(options.schema)"
                 + (model.unserved.isEmpty ? "" : "; not served: " + model.unserved.map { "\($0.name) (\($0.reason))" }.joined(separator: ", ")))

        var limits = Limits()
        limits.maxPendingChanges = options.maxPendingChanges
        limits.maxPendingBytes = options.maxPendingBytes
        var security = ServerContext.Security()
        security.authenticationDisabled = options.insecureNoAuth
        security.tlsAvailable = tls != nil
        security.remoteAuthNeedsTLS = !options.insecureNoTLS
        let context = ServerContext(model: model, databaseDescription: database.description, limits: limits,
                                    throttle: LoginThrottle(policy: options.throttle), authenticationRequired: users > 0,
                                    security: security)
        context.roles = roles
        context.slowCommandMilliseconds = options.logSlow
        var work = WorkSettings()
        work.readTimeout = options.statementTimeout * 1000
        work.saveTimeout = options.saveTimeout * 1000
        work.lockTimeout = options.lockTimeout * 1000
        work.bulkTimeout = options.bulkTimeout * 1000
        work.replyStall = options.replyStall
        work.durableTTL = options.durableUnits ? options.resumeTTL : nil
        context.work = work
        // Reads run under the read timeout; SAVE, IMPORT and EXPORT set their own per transaction.
        let pool = ConnectionPool(conninfo: database.serving, size: options.poolSize,
                                  setup: ["SET TIME ZONE 'UTC'", "SET DateStyle TO ISO", "SET statement_timeout = \(work.readTimeout)",
                                          // JIT compilation of a large predicate ignores cancellation and
                                          // time limits for minutes: short OLTP statements gain little from it.
                                          "SET jit = off"])
        var configuration = Server.Configuration()
        configuration.host = options.listenHost
        configuration.port = options.listenPort
        configuration.maxSessions = options.maxSessions
        configuration.maxLineLength = options.maxLineLength
        configuration.idleTimeout = options.idleTimeout
        configuration.signInTimeout = options.signInTimeout
        configuration.importStallSeconds = options.importStall
        configuration.maxReplyBytes = options.maxReplyBytes
        configuration.shutdownGrace = options.shutdownGrace
        configuration.resumeTTL = options.resumeTTL
        configuration.durableUnits = options.durableUnits
        configuration.replyStallSeconds = options.replyStall
        configuration.authenticationNote = options.insecureNoAuth ? "no authentication: insecure" : "no authentication"
        configuration.tls = tls
        configuration.tlsListen = options.tlsListen
        configuration.proxyFrom = options.proxyFrom
        let server = try Server(configuration: configuration, context: context, pool: pool)
        // The watcher reads the change log from its first read on: it starts before any session
        // can WATCH, so nothing a watching session should see is taken for history.
        let watcher = ModelWatcher(conninfo: database.serving, schema: options.schema, context: context,
                                   installer: options.migrate ? database.conninfo : nil,
                                   plansStale: { pool.forgetPreparedStatements() })
        watcher.start()
        // --durable-units: no session is served before this server is known to be alive, or a
        // RESUME elsewhere would take its open sessions for a crashed server's.
        if options.durableUnits && !watcher.awaitLive(seconds: 60) {
            throw Refusal(description: "--durable-units: could not hold this server's liveness lock in PostgreSQL within 60 s; not serving")
        }
        try server.bind(reserved: reserved, reservedTLS: reservedTLS)
        var endpoints: AdminServer?
        if let listen = options.adminListen {
            let serving = database.serving
            let started = try AdminServer(host: listen.host, port: listen.port, context: context) { Connection.ping(serving) == .accepting }
            started.start()
            Log.info("admin endpoints on \(listen.host):\(started.port) (/live, /ready, /metrics)")
            print("recordsd admin on \(listen.host):\(started.port)")
            endpoints = started
        }
        let draining = endpoints
        let serverStop = server.stopper
        let stop: @Sendable () -> Void = {
            draining?.markStopping()
            serverStop()
        }
        let tlsFiles = options.tlsCert.flatMap { cert in options.tlsKey.map { (cert: cert, key: $0) } }
        Signals.handle { signal in
            if signal == SIGHUP {
                Log.info("SIGHUP: reloading the model")
                watcher.requestReload()
                if let tls, let cert = tlsFiles?.cert, let key = tlsFiles?.key {
                    do {
                        try tls.reload(certificateFile: cert, keyFile: key)
                        Log.info("SIGHUP: TLS certificate reloaded from \(cert)")
                    } catch {
                        Log.error("SIGHUP: TLS certificate not reloaded, the current one stays: \(error)")
                    }
                }
            } else {
                Log.info("signal \(signal): stopping")
                stop()
            }
        }
        let address = options.listenHost.contains(":") ? "[\(options.listenHost)]:\(server.boundPort)" : "\(options.listenHost):\(server.boundPort)"
        Log.info("listening on \(address)")
        print("recordsd listening on \(address)")
        if let tlsListen = options.tlsListen {
            let tlsAddress = tlsListen.host.contains(":") ? "[\(tlsListen.host)]:\(server.boundTLSPort)" : "\(tlsListen.host):\(server.boundTLSPort)"
            Log.info("listening for TLS on \(tlsAddress)")
            print("recordsd listening for TLS on \(tlsAddress)")
        }
        csystem_flush_stdout()
        server.run()
        watcher.stop()
        pool.shutdown()
        Log.info("stopped")
    }
}

struct MigrateCommand {
    var options: Options
    var statusOnly: Bool

    func run(environment: [String: String]) throws {
        let database = try Database.resolve(options, environment: environment)
        defer { database.embedded?.stop() }
        let connection = try database.connect()
        let files = try Migrator.load(directory: options.migrations)
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
        let applied = try Migrator.migrate(files, connection: connection)
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
