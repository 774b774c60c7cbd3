#if canImport(Glibc)
import Glibc
#endif
import CSystem
import Foundation
import Postgres
import Records
import RecordsServer
import TLS

/// `recordsd serve`: each step of a start, in order, one function each.
struct ServeCommand {
    var options: Options

    func run(environment: [String: String]) throws {
        // The ports first, the admin port too: one in use stops the server in a moment,
        // before it changes anything (not after the migrations).
        let reserved = try Server.Reservation(host: options.listenHost, port: options.listenPort)
        let reservedTLS = try options.tlsListen.map { try Server.Reservation(host: $0.host, port: $0.port) }
        let reservedAdmin = try options.adminListen.map { try AdminServer.Reservation(host: $0.host, port: $0.port) }
        // Cursor keys before anything else: a file that cannot be read stops the start.
        let cursorKeys = try options.cursorSecretFile.map { SealingKeys(secrets: try CursorSecrets.read($0)) } ?? SealingKeys.random()
        let database = try Database.resolve(options, environment: environment)
        defer { database.embedded?.stop() }
        let (model, roles) = try prepare(database)
        try refuseWithoutAuthentication(users: roles.count)
        let tls = try tlsContext()
        Log.info("serving \(model.entities.count) entities from schema \(options.schema)"
                 + (model.unserved.isEmpty ? "" : "; not served: " + model.unserved.map { "\($0.name) (\($0.reason))" }.joined(separator: ", ")))
        let context = makeContext(model: model, roles: roles, tls: tls, cursors: cursorKeys, database: database)
        // Reads run under the read timeout; SAVE, IMPORT and EXPORT set their own per transaction.
        let failoverWait = context.work.failoverWait
        let pool = ConnectionPool(conninfo: database.serving, size: options.poolSize, setup: context.work.connectionSetup,
                                  failoverWait: Double(failoverWait))
        let server = try Server(configuration: configuration(tls: tls), context: context, pool: pool)
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
        let endpoints = reservedAdmin.map { startAdmin($0, context: context, board: server.board, serving: database.serving) }
        let serverStop = server.stopper
        handleSignals(watcher: watcher, cursorKeys: cursorKeys, tls: tls) {
            endpoints?.markStopping()
            serverStop()
        }
        announce(server)
        server.run()
        watcher.stop()
        pool.shutdown()
        Log.info("stopped")
    }

    /// Migrations (unless --no-migrate), the embedded cluster's serving role, the model and the
    /// users, read as the owner; a warning when the serving role escapes row-level security.
    private func prepare(_ database: Database) throws -> (Model, [String: Users.Grant]) {
        let admin = try database.connect()
        defer { admin.close() }
        if options.migrate {
            let files = try database.migrationFiles(options)
            let applied = try Migrator.migrate(files, connection: admin, schema: options.schema)
            Log.info(applied.isEmpty ? "migrations up to date (\(files.count))" : "applied \(applied.count) migration(s)")
        }
        if let embedded = database.embedded { try embedded.grantServingRole(admin, schema: options.schema) }
        let model = try ModelReflector.reflect(admin, schema: options.schema)
        let roles = (try? Users.roles(admin)) ?? [:]
        let guarded = model.entities.filter(\.hasRowSecurity).map(\.name)
        if !guarded.isEmpty, let serving = try? (database.embedded == nil ? admin : Connection(database.serving)),
           let kind = try? ServingRole.bypassesRowSecurity(serving) {
            Log.warning("connected to PostgreSQL as \(kind): the row-level security policies of \(guarded.joined(separator: ", ")) are ignored and every user reads and writes every record; connect as an ordinary role (see README, Per-user records)")
        }
        return (model, roles)
    }

    private func refuseWithoutAuthentication(users: Int) throws {
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
    }

    /// A certificate and its key, both or neither; off loopback, TLS or --insecure-no-tls.
    private func tlsContext() throws -> TLSContext? {
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
        return tls
    }

    /// What every session shares: the model, limits, security, timeouts, users, cursor keys.
    private func makeContext(model: Model, roles: [String: Users.Grant], tls: TLSContext?, cursors: SealingKeys,
                             database: Database) -> ServerContext {
        var limits = Limits()
        limits.maxPendingChanges = options.maxPendingChanges
        limits.maxPendingBytes = options.maxPendingBytes
        var security = ServerContext.Security()
        security.authenticationDisabled = options.insecureNoAuth
        security.tlsAvailable = tls != nil
        security.remoteAuthNeedsTLS = !options.insecureNoTLS
        let context = ServerContext(model: model, databaseDescription: database.description, limits: limits,
                                    throttle: LoginThrottle(policy: options.throttle), authenticationRequired: !roles.isEmpty,
                                    security: security)
        context.roles = roles
        context.cursors = cursors
        context.slowCommandMilliseconds = options.logSlow
        var work = WorkSettings()
        work.readTimeout = options.statementTimeout * 1000
        work.saveTimeout = options.saveTimeout * 1000
        work.lockTimeout = options.lockTimeout * 1000
        work.bulkTimeout = options.bulkTimeout * 1000
        work.replyStall = options.replyStall
        work.durableTTL = options.durableUnits ? options.resumeTTL : nil
        work.failoverWait = options.failoverWait ?? (Conninfo.hostCount(database.serving) > 1 ? 30 : 0)
        context.work = work
        return context
    }

    private func configuration(tls: TLSContext?) -> Server.Configuration {
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
        return configuration
    }

    private func startAdmin(_ reserved: AdminServer.Reservation, context: ServerContext, board: SessionBoard, serving: String) -> AdminServer {
        let admin = AdminServer(reserved: reserved, context: context, sessions: board, token: options.adminToken) {
            Connection.ping(serving) == .accepting
        }
        admin.start()
        let host = options.adminListen?.host ?? "127.0.0.1"
        Log.info("admin endpoints on \(host):\(admin.port) (/live, /ready, /metrics)")
        Log.announce("recordsd admin on \(host):\(admin.port)", fields: [("event", .string("admin")), ("address", .string("\(host):\(admin.port)"))])
        return admin
    }

    /// SIGHUP reloads the model and re-reads the cursor secrets and the certificate; SIGTERM and
    /// SIGINT `stop`.
    private func handleSignals(watcher: ModelWatcher, cursorKeys: SealingKeys, tls: TLSContext?, stop: @escaping @Sendable () -> Void) {
        let cursorFile = options.cursorSecretFile
        let tlsFiles = options.tlsCert.flatMap { cert in options.tlsKey.map { (cert: cert, key: $0) } }
        Signals.handle { signal in
            guard signal == SIGHUP else {
                Log.info("signal \(signal): stopping")
                return stop()
            }
            Log.info("SIGHUP: reloading the model")
            watcher.requestReload()
            if let file = cursorFile {
                do {
                    cursorKeys.replace(secrets: try CursorSecrets.read(file))
                    Log.info("SIGHUP: cursor secrets re-read from \(file)")
                } catch {
                    Log.error("SIGHUP: cursor secrets not re-read, the current ones stay: \(error)")
                }
            }
            if let tls, let cert = tlsFiles?.cert, let key = tlsFiles?.key {
                do {
                    try tls.reload(certificateFile: cert, keyFile: key)
                    Log.info("SIGHUP: TLS certificate reloaded from \(cert)")
                } catch {
                    Log.error("SIGHUP: TLS certificate not reloaded, the current one stays: \(error)")
                }
            }
        }
    }

    /// The lines that say the server accepts connections (stdout, for scripts and tests).
    private func announce(_ server: Server) {
        let address = options.listenHost.contains(":") ? "[\(options.listenHost)]:\(server.boundPort)" : "\(options.listenHost):\(server.boundPort)"
        Log.info("listening on \(address)")
        Log.announce("recordsd listening on \(address)", fields: [("event", .string("listening")), ("address", .string(address))])
        if let tlsListen = options.tlsListen {
            let tlsAddress = tlsListen.host.contains(":") ? "[\(tlsListen.host)]:\(server.boundTLSPort)" : "\(tlsListen.host):\(server.boundTLSPort)"
            Log.info("listening for TLS on \(tlsAddress)")
            Log.announce("recordsd listening for TLS on \(tlsAddress)", fields: [("event", .string("listening_tls")), ("address", .string(tlsAddress))])
        }
        csystem_flush_stdout()
    }
}

/// `--cursor-secret-file`: one secret a line, the first seals cursors, every one opens them
/// (a rotation puts the new one first and drops the old once no cursor made with it matters).
/// Replicas behind one balancer share the file so that a page's cursor works on any of them.
enum CursorSecrets {
    static let minimumLength = 16

    static func read(_ path: String) throws -> [String] {
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
            throw Refusal(description: "--cursor-secret-file: cannot read \(path)")
        }
        let secrets = text.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        guard !secrets.isEmpty else { throw Refusal(description: "--cursor-secret-file: \(path) holds no secret (one a line)") }
        guard secrets.allSatisfy({ $0.utf8.count >= minimumLength }) else {
            throw Refusal(description: "--cursor-secret-file: every secret in \(path) is at least \(minimumLength) characters (openssl rand -hex 32 makes one)")
        }
        return secrets
    }
}

extension SealingKeys: CursorSealing {}
