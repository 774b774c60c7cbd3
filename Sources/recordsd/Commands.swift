#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Postgres
import Records
import RecordsServer

/// Where the data lives for this run: a configured PostgreSQL or the embedded cluster.
struct Database {
    var conninfo: String
    var description: String
    var embedded: EmbeddedPostgres?

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
                guard error.isUnavailable, attempt < seconds else { throw error }
                if attempt == 0 { Log.warning("waiting for PostgreSQL (\(description)): \(error.message)") }
                attempt += 1
                sleep(1)
            }
        }
    }
}

struct ServeCommand {
    var options: Options

    func run(environment: [String: String]) throws {
        var database = try Database.resolve(options, environment: environment)
        defer { database.embedded?.stop() }
        let admin = try database.connect()
        if options.migrate {
            let files = try Migrator.load(directory: options.migrations)
            let applied = try Migrator.migrate(files, connection: admin)
            Log.info(applied.isEmpty ? "migrations up to date (\(files.count))" : "applied \(applied.count) migration(s)")
        }
        let model = try ModelReflector.reflect(admin, schema: options.schema)
        admin.close()
        Log.info("serving \(model.entities.count) entities from schema \(options.schema)"
                 + (model.unserved.isEmpty ? "" : "; not served: " + model.unserved.map { "\($0.name) (\($0.reason))" }.joined(separator: ", ")))

        var limits = Limits()
        limits.maxLineLength = options.maxLineLength
        limits.maxPendingChanges = options.maxPendingChanges
        let context = ServerContext(model: model, databaseDescription: database.description, limits: limits)
        let pool = ConnectionPool(conninfo: database.conninfo, size: options.poolSize,
                                  setup: ["SET TIME ZONE 'UTC'", "SET DateStyle TO ISO"])
        var configuration = Server.Configuration()
        configuration.host = options.listenHost
        configuration.port = options.listenPort
        configuration.maxSessions = options.maxSessions
        configuration.maxLineLength = options.maxLineLength
        configuration.idleTimeout = options.idleTimeout
        configuration.maxReplyBytes = options.maxReplyBytes
        configuration.shutdownGrace = options.shutdownGrace
        let server = try Server(configuration: configuration, context: context, pool: pool)
        try server.bind()
        let watcher = ModelWatcher(conninfo: database.conninfo, schema: options.schema, context: context)
        watcher.start()
        Signals.handle { signal in
            if signal == SIGHUP {
                Log.info("SIGHUP: reloading the model")
                watcher.requestReload()
            } else {
                Log.info("signal \(signal): stopping")
                server.stop()
            }
        }
        let address = options.listenHost.contains(":") ? "[\(options.listenHost)]:\(server.boundPort)" : "\(options.listenHost):\(server.boundPort)"
        Log.info("listening on \(address)")
        print("recordsd listening on \(address)")
        fflush(stdout)
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
        var database = try Database.resolve(options, environment: environment)
        defer { database.embedded?.stop() }
        let connection = try database.connect()
        let files = try Migrator.load(directory: options.migrations)
        if statusOnly {
            for row in try Migrator.status(files, connection: connection) {
                let state: String
                switch row.state {
                case .applied(let at): state = "applied \(at)"
                case .pending: state = "pending"
                case .changed: state = "CHANGED since applied"
                case .missingFile: state = "applied, but its file is missing"
                }
                print(String(format: "%04d", row.version) + "  " + row.name.padding(toLength: 28, withPad: " ", startingAt: 0) + "  " + state)
            }
            return
        }
        let applied = try Migrator.migrate(files, connection: connection)
        print(applied.isEmpty ? "up to date: \(files.count) migration(s) applied before" : "applied \(applied.count) migration(s): " + applied.map { String(format: "%04d_", $0.version) + $0.name }.joined(separator: ", "))
    }
}
