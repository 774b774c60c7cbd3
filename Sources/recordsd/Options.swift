import Foundation
import Postgres
import Records
import RecordsProtocol
import RecordsServer

/// A usage error: printed with the usage, exit status 2.
struct UsageError: Error, CustomStringConvertible {
    var description: String
}

/// Options shared by every subcommand; each flag has an environment variable of the same meaning.
struct Options {
    var listenHost = "127.0.0.1"
    var listenPort = 7878
    /// nil: the libpq PG* variables if any is set, else the embedded cluster.
    var database: String?
    /// `--migrations DIR`: the application's migrations. Unset: the embedded cluster applies
    /// the sample domain (./migrations); a given database gets none of ours (`migrationFiles`).
    var migrations: String?
    var dataDirectory = "./.recordsd"
    var poolSize = 4
    var logLevel = Log.Level.info
    /// `--log-format json`: one JSON object an event.
    var logJSON = false
    /// `--log-slow MS`: database commands at least this long are logged with their text.
    var logSlow: Int?
    var schema = "public"
    var migrate = true
    var maxSessions = 10_000
    var maxLineLength = 1 << 20
    var maxPendingChanges = 1_000_000
    var maxPendingBytes = 64 << 20
    var idleTimeout = 0
    var signInTimeout = 30
    var importStall = 30
    var maxReplyBytes = 64 << 20
    var shutdownGrace = 10
    /// Seconds a session handed off at shutdown waits for RESUME.
    var resumeTTL = HandOff.defaultTTL
    /// Write each session's state to PostgreSQL as it changes (a crash loses nothing acknowledged).
    var durableUnits = false
    /// Seconds: reads, SAVE, a row lock SAVE waits for, IMPORT and EXPORT; a client that stops reading.
    var statementTimeout = 5
    var saveTimeout = 60
    var lockTimeout = 5
    var bulkTimeout = 300
    var replyStall = 30
    var insecureNoAuth = false
    var insecureNoTLS = false
    /// PEM files for STARTTLS and the TLS listener (re-read on SIGHUP).
    var tlsCert: String?
    var tlsKey: String?
    var tlsListen: (host: String, port: Int)?
    /// Balancers whose connections begin with a PROXY protocol v1 header (HAProxy's send-proxy).
    var proxyFrom: Set<String> = []
    /// HTTP for operators' tools: /live, /ready, /metrics (off unless given).
    var adminListen: (host: String, port: Int)?
    var throttle = LoginThrottle.Policy()
    /// `user add` / `user passwd`: the role, and a password read from stdin instead of a prompt.
    var role: Role?
    /// `user add`: the PostgreSQL role the user's work runs as (row-level security).
    var databaseRole: String?
    /// `uninstall --yes`: do it (without, it says what it would drop).
    var confirmed = false
    /// Seconds to wait at start for a PostgreSQL that does not answer yet; 0: for ever.
    var startupTimeout = 60
    /// Secrets that seal FIND's cursors, shared by replicas (else a random key of this process).
    var cursorSecretFile: String?
    /// The token `/sessions` on the admin listener requires (`recordsd sessions` sends it).
    var adminToken: String?
    /// Seconds work waits for a PostgreSQL that cannot be reached before UNAVAILABLE; nil: 30
    /// when the database names several hosts (a formation whose primary moves), else 0.
    var failoverWait: Int?
    /// `sessions --json`: the admin listener's JSON as it is.
    var json = false

    static let usage = """
        usage: recordsd [serve] [options]        run the server (applies pending migrations first)
               recordsd migrate [options]        apply pending migrations and exit
               recordsd health [options]         exit 0 when the admin listener says /ready (a health check)
               recordsd sessions [--json] [options]
                                                 list the server's open sessions (its admin listener's
                                                 /sessions; needs the admin token)
               recordsd sessions kill ID [options]
                                                 end a session, its pending changes dropped
               recordsd migrate status [options] list migrations and whether each is applied
               recordsd uninstall [--yes] [options]
                                                 remove what recordsd installed in the database
                                                 (schema records, its triggers); the data stays
               recordsd user add NAME --role reader|writer|admin [--db-role R] [options]
               recordsd user passwd NAME | user remove NAME | user list [options]
                                                 manage users; the password is RECORDS_ADMIN_PASSWORD
                                                 when set, else asked without echo, or read from
                                                 stdin when it is not a terminal
               recordsd --help | --version

        authentication: once any user exists, every session must AUTH first. Listening on an
        address other than loopback requires it: create an admin with `recordsd user add`, or
        pass --insecure-no-auth (RECORDSD_INSECURE_NO_AUTH=1) to serve without (dangerous).
        It also requires TLS (--tls-cert and --tls-key), or --insecure-no-tls: AUTH and USER
        from another host are refused on a connection that is not encrypted.

        Any variable below may instead name a file holding its value with _FILE appended
        (DATABASE_URL_FILE=/run/secrets/database_url), for container secrets.

        options (each also set by the environment variable shown):
          --listen HOST:PORT       address to listen on (RECORDSD_LISTEN; default 127.0.0.1:7878)
          --database URL           PostgreSQL to use (DATABASE_URL; else the libpq PG* variables;
                                   else an embedded cluster started in --data-dir)
          --migrations DIR         migration files NNNN_name.sql to apply (RECORDSD_MIGRATIONS); without
                                   it the embedded cluster gets the sample domain (./migrations) and
                                   a database you name gets none: only recordsd's own schema
          --startup-timeout S      wait this long at start for a PostgreSQL that does not answer yet,
                                   0 for ever (RECORDSD_STARTUP_TIMEOUT; default 60)
          --failover-wait S        while PostgreSQL cannot be reached (a formation promoting a new
                                   primary), work waits this long for it before UNAVAILABLE
                                   (RECORDSD_FAILOVER_WAIT; default 30 when --database names several
                                   hosts, else 0)
          --data-dir DIR           where the embedded cluster lives (RECORDSD_DATA_DIR; default ./.recordsd)
          --pool-size N            PostgreSQL connections shared by all sessions (RECORDSD_POOL_SIZE; default 4)
          --schema NAME            the schema served as entities (RECORDSD_SCHEMA; default public)
          --log-level LEVEL        debug, info, warning or error (RECORDSD_LOG_LEVEL; default info)
          --log-format FORMAT      text, or json: one object an event with time, level, session
                                   and message (RECORDSD_LOG_FORMAT; default text)
          --log-slow MS            log database commands that take MS or longer, with their
                                   text (AUTH and USER show only the verb) (RECORDSD_LOG_SLOW);
                                   at debug level every command is logged with its duration
          --no-migrate             serve without applying pending migrations (RECORDSD_NO_MIGRATE=1)
          --max-sessions N         concurrent sessions (RECORDSD_MAX_SESSIONS; default 10000)
          --max-line-length N      bytes in one request line (RECORDSD_MAX_LINE_LENGTH; default 1048576)
          --max-pending N          pending changes in one unit of work (RECORDSD_MAX_PENDING; default 1000000)
          --max-pending-bytes N    bytes of values one unit of work holds (RECORDSD_MAX_PENDING_BYTES;
                                   default 67108864)
          --idle-timeout SECONDS   close sessions idle this long, 0 never (RECORDSD_IDLE_TIMEOUT; default 0)
          --sign-in-timeout S      close a session that must sign in and has not after S seconds, 0 never
                                   (RECORDSD_SIGN_IN_TIMEOUT; default 30)
          --import-stall SECONDS   abort an IMPORT whose data stops coming this long while its COPY
                                   holds a pooled connection (RECORDSD_IMPORT_STALL; default 30)
          --max-reply-bytes N      a reply held in memory; streamed FIND records are not held
                                   (RECORDSD_MAX_REPLY_BYTES; default 67108864)
          --shutdown-grace SECONDS how long in-flight commands may finish on SIGTERM/SIGINT; those
                                   still running then are cancelled and answered (RECORDSD_SHUTDOWN_GRACE; default 10);
                                   then each session with pending changes or watches is handed off
          --resume-ttl SECONDS     how long a handed-off session waits for RESUME on any server
                                   (RECORDSD_RESUME_TTL; default 900, at most 3000)
          --durable-units          write each session's state to PostgreSQL whenever it changes, before
                                   the reply that changed it: a crash (kill -9) loses nothing that was
                                   answered; clients RESUME on any server (RECORDSD_DURABLE_UNITS=1)
          --statement-timeout S    a read's statement may run this long (RECORDSD_STATEMENT_TIMEOUT; default 5)
          --save-timeout S         a SAVE's statements may run this long (RECORDSD_SAVE_TIMEOUT; default 60)
          --lock-timeout S         a SAVE waits this long for a row another transaction holds
                                   (RECORDSD_LOCK_TIMEOUT; default 5)
          --bulk-timeout S         an IMPORT, EXPORT or FIND stream may run this long (RECORDSD_BULK_TIMEOUT; default 300)
          --reply-stall S          a FIND or EXPORT whose client reads nothing this long stops and
                                   frees its connection (RECORDSD_REPLY_STALL; default 30)
          --auth-delay SECONDS     wait after a failed AUTH, doubling with each further one
                                   (RECORDSD_AUTH_DELAY; default 0.5)
          --auth-lock-after N      failures of one user from one address before a lock (default 5)
          --auth-lock-seconds S    how long that lock lasts (RECORDSD_AUTH_LOCK_SECONDS; default 300)
          --insecure-no-auth       serve without authentication, even off loopback
          --tls-cert FILE          PEM certificate (with its chain) for STARTTLS and --tls-listen
                                   (RECORDSD_TLS_CERT); re-read with the key on SIGHUP
          --tls-key FILE           its PEM private key (RECORDSD_TLS_KEY)
          --cursor-secret-file F   secrets that seal FIND's AFTER cursors, one a line, the first seals,
                                   each opens (RECORDSD_CURSOR_SECRET_FILE); replicas behind one
                                   balancer share it; re-read on SIGHUP; without it a key of this
                                   process: its cursors work only on it, until it restarts
          --admin-listen HOST:PORT HTTP for operators (off unless given; keep it on loopback or a
                                   private network): GET /live, /ready (PostgreSQL reachable,
                                   accepting), /metrics (Prometheus text), and with a token
                                   GET /sessions, POST /sessions/ID/kill
          --admin-token-file FILE  the token /sessions requires (Authorization: Bearer), which
                                   `recordsd sessions` sends (RECORDSD_ADMIN_TOKEN or _FILE); without
                                   it /sessions is refused
          --tls-listen HOST:PORT   also accept connections that speak TLS from their first byte
                                   (RECORDSD_TLS_LISTEN)
          --proxy-from ADDR[,ADDR] balancers (HAProxy with send-proxy) whose connections to --listen
                                   begin with a PROXY protocol v1 header naming the client: its address
                                   counts for throttling, logs and the loopback rule (RECORDSD_PROXY_FROM)
          --insecure-no-tls        allow listening off loopback without TLS, and AUTH in clear
                                   from other hosts (dangerous)

        examples:
          recordsd                                        embedded PostgreSQL, listens on 127.0.0.1:7878
          recordsd --database postgresql://app@db:5432/app --pool-size 8
          DATABASE_URL=postgresql:///records recordsd migrate status
          recordsd --listen 127.0.0.1:0                   any free port (printed once ready)
        """

    /// Reads the environment first, then the flags, which win.
    mutating func parse(_ arguments: inout [String], environment: [String: String]) throws {
        try read(environment)
        try readFlags(&arguments)
    }

    /// The settings the environment gives (`RECORDSD_*`, `DATABASE_URL`).
    private mutating func read(_ environment: [String: String]) throws {
        if let value = environment["RECORDSD_LISTEN"] { try setListen(value) }
        database = environment["DATABASE_URL"].flatMap { $0.isEmpty ? nil : $0 }
        if let value = environment["RECORDSD_MIGRATIONS"] { migrations = value }
        if let value = environment["RECORDSD_STARTUP_TIMEOUT"] { startupTimeout = try nonNegative(value, "RECORDSD_STARTUP_TIMEOUT") }
        if let value = environment["RECORDSD_DATA_DIR"] { dataDirectory = value }
        if let value = environment["RECORDSD_POOL_SIZE"] { poolSize = try positive(value, "RECORDSD_POOL_SIZE") }
        if let value = environment["RECORDSD_SCHEMA"] { schema = value }
        if let value = environment["RECORDSD_LOG_LEVEL"] { try setLevel(value) }
        if let value = environment["RECORDSD_LOG_FORMAT"], !value.isEmpty { try setFormat(value) }
        if let value = environment["RECORDSD_LOG_SLOW"], !value.isEmpty { logSlow = try count(value, "RECORDSD_LOG_SLOW") }
        if let value = environment["RECORDSD_NO_MIGRATE"], ["1", "true", "yes"].contains(value.lowercased()) { migrate = false }
        if let value = environment["RECORDSD_MAX_SESSIONS"] { maxSessions = try positive(value, "RECORDSD_MAX_SESSIONS") }
        if let value = environment["RECORDSD_MAX_LINE_LENGTH"] { maxLineLength = try positive(value, "RECORDSD_MAX_LINE_LENGTH") }
        if let value = environment["RECORDSD_MAX_PENDING"] { maxPendingChanges = try positive(value, "RECORDSD_MAX_PENDING") }
        if let value = environment["RECORDSD_MAX_PENDING_BYTES"] { maxPendingBytes = try positive(value, "RECORDSD_MAX_PENDING_BYTES") }
        if let value = environment["RECORDSD_IDLE_TIMEOUT"] { idleTimeout = try count(value, "RECORDSD_IDLE_TIMEOUT") }
        if let value = environment["RECORDSD_SIGN_IN_TIMEOUT"] { signInTimeout = try count(value, "RECORDSD_SIGN_IN_TIMEOUT") }
        if let value = environment["RECORDSD_IMPORT_STALL"] { importStall = try positive(value, "RECORDSD_IMPORT_STALL") }
        if let value = environment["RECORDSD_MAX_REPLY_BYTES"] { maxReplyBytes = try positive(value, "RECORDSD_MAX_REPLY_BYTES") }
        if let value = environment["RECORDSD_SHUTDOWN_GRACE"] { shutdownGrace = try count(value, "RECORDSD_SHUTDOWN_GRACE") }
        if let value = environment["RECORDSD_RESUME_TTL"] { resumeTTL = try ttl(value, "RECORDSD_RESUME_TTL") }
        if let value = environment["RECORDSD_DURABLE_UNITS"] { durableUnits = ["1", "true", "yes", "on"].contains(value.lowercased()) }
        if let value = environment["RECORDSD_STATEMENT_TIMEOUT"] { statementTimeout = try positive(value, "RECORDSD_STATEMENT_TIMEOUT") }
        if let value = environment["RECORDSD_SAVE_TIMEOUT"] { saveTimeout = try positive(value, "RECORDSD_SAVE_TIMEOUT") }
        if let value = environment["RECORDSD_LOCK_TIMEOUT"] { lockTimeout = try positive(value, "RECORDSD_LOCK_TIMEOUT") }
        if let value = environment["RECORDSD_BULK_TIMEOUT"] { bulkTimeout = try positive(value, "RECORDSD_BULK_TIMEOUT") }
        if let value = environment["RECORDSD_REPLY_STALL"] { replyStall = try positive(value, "RECORDSD_REPLY_STALL") }
        if let value = environment["RECORDSD_INSECURE_NO_AUTH"], ["1", "true", "yes"].contains(value.lowercased()) { insecureNoAuth = true }
        if let value = environment["RECORDSD_INSECURE_NO_TLS"], ["1", "true", "yes"].contains(value.lowercased()) { insecureNoTLS = true }
        if let value = environment["RECORDSD_TLS_CERT"], !value.isEmpty { tlsCert = value }
        if let value = environment["RECORDSD_TLS_KEY"], !value.isEmpty { tlsKey = value }
        if let value = environment["RECORDSD_TLS_LISTEN"], !value.isEmpty { tlsListen = try address(value, "RECORDSD_TLS_LISTEN") }
        if let value = environment["RECORDSD_PROXY_FROM"], !value.isEmpty { proxyFrom = try addresses(value, "RECORDSD_PROXY_FROM") }
        if let value = environment["RECORDSD_CURSOR_SECRET_FILE"], !value.isEmpty { cursorSecretFile = value }
        if let value = environment["RECORDSD_FAILOVER_WAIT"], !value.isEmpty { failoverWait = try nonNegative(value, "RECORDSD_FAILOVER_WAIT") }
        if let value = environment["RECORDSD_ADMIN_TOKEN"], !value.isEmpty { adminToken = try token(value, "RECORDSD_ADMIN_TOKEN") }
        if let value = environment["RECORDSD_ADMIN_LISTEN"], !value.isEmpty { adminListen = try address(value, "RECORDSD_ADMIN_LISTEN") }
        if let value = environment["RECORDSD_AUTH_DELAY"] { throttle.baseDelay = try seconds(value, "RECORDSD_AUTH_DELAY") }
        if let value = environment["RECORDSD_AUTH_LOCK_SECONDS"] { throttle.lockSeconds = try seconds(value, "RECORDSD_AUTH_LOCK_SECONDS") }
    }

    /// The flags; `arguments` keeps the rest (a command and its words).
    private mutating func readFlags(_ arguments: inout [String]) throws {
        var rest: [String] = []
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            index += 1
            var flag = argument
            var inline: String?
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                flag = String(argument[..<equals])
                inline = String(argument[argument.index(after: equals)...])
            }
            func value() throws -> String {
                if let inline { return inline }
                guard index < arguments.count else { throw UsageError(description: "\(flag) needs a value") }
                index += 1
                return arguments[index - 1]
            }
            switch flag {
            case "--listen": try setListen(try value())
            case "--database": database = try value()
            case "--migrations": migrations = try value()
            case "--startup-timeout": startupTimeout = try nonNegative(try value(), flag)
            case "--data-dir": dataDirectory = try value()
            case "--pool-size": poolSize = try positive(try value(), flag)
            case "--schema": schema = try value()
            case "--log-level": try setLevel(try value())
            case "--log-format": try setFormat(try value())
            case "--log-slow": logSlow = try count(try value(), flag)
            case "--no-migrate": migrate = false
            case "--max-sessions": maxSessions = try positive(try value(), flag)
            case "--max-line-length": maxLineLength = try positive(try value(), flag)
            case "--max-pending": maxPendingChanges = try positive(try value(), flag)
            case "--max-pending-bytes": maxPendingBytes = try positive(try value(), flag)
            case "--idle-timeout": idleTimeout = try count(try value(), flag)
            case "--sign-in-timeout": signInTimeout = try count(try value(), flag)
            case "--import-stall": importStall = try positive(try value(), flag)
            case "--max-reply-bytes": maxReplyBytes = try positive(try value(), flag)
            case "--shutdown-grace": shutdownGrace = try count(try value(), flag)
            case "--resume-ttl": resumeTTL = try ttl(try value(), flag)
            case "--durable-units": durableUnits = true
            case "--statement-timeout": statementTimeout = try positive(try value(), flag)
            case "--save-timeout": saveTimeout = try positive(try value(), flag)
            case "--lock-timeout": lockTimeout = try positive(try value(), flag)
            case "--bulk-timeout": bulkTimeout = try positive(try value(), flag)
            case "--reply-stall": replyStall = try positive(try value(), flag)
            case "--yes": confirmed = true
            case "--insecure-no-auth": insecureNoAuth = true
            case "--insecure-no-tls": insecureNoTLS = true
            case "--tls-cert": tlsCert = try value()
            case "--tls-key": tlsKey = try value()
            case "--tls-listen": tlsListen = try address(try value(), flag)
            case "--proxy-from": proxyFrom = try addresses(try value(), flag)
            case "--cursor-secret-file": cursorSecretFile = try value()
            case "--failover-wait": failoverWait = try nonNegative(try value(), flag)
            case "--json": json = true
            case "--admin-token-file":
                let path = try value()
                guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { throw UsageError(description: "--admin-token-file: cannot read \(path)") }
                adminToken = try token(text.trimmingCharacters(in: .whitespacesAndNewlines), flag)
            case "--admin-listen": adminListen = try address(try value(), flag)
            case "--auth-delay": throttle.baseDelay = try seconds(try value(), flag)
            case "--auth-lock-after": throttle.lockAfter = try positive(try value(), flag)
            case "--auth-lock-seconds": throttle.lockSeconds = try seconds(try value(), flag)
            case "--role":
                let name = try value()
                guard let parsed = Role(name: name) else { throw UsageError(description: "--role takes reader, writer or admin, not '\(name)'") }
                role = parsed
            case "--db-role": databaseRole = try value()
            default:
                if argument.hasPrefix("-") { throw UsageError(description: "unknown option \(argument)") }
                rest.append(argument)
            }
        }
        arguments = rest
    }

    private mutating func setListen(_ text: String) throws {
        (listenHost, listenPort) = try address(text, "--listen")
    }

    /// `HOST:PORT` (`[::1]:7878` for IPv6); an empty host is 127.0.0.1.
    private func address(_ text: String, _ name: String) throws -> (host: String, port: Int) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else {
            throw UsageError(description: "\(name) takes HOST:PORT, such as 127.0.0.1:7878, not '\(text)'")
        }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return (host.isEmpty ? "127.0.0.1" : host, port)
    }

    private mutating func setLevel(_ text: String) throws {
        guard let level = Log.Level(name: text) else {
            throw UsageError(description: "--log-level takes debug, info, warning or error, not '\(text)'")
        }
        logLevel = level
    }

    mutating func setFormat(_ text: String) throws {
        switch text.lowercased() {
        case "text": logJSON = false
        case "json": logJSON = true
        default: throw UsageError(description: "--log-format takes text or json, not '\(text)'")
        }
    }

    /// Numeric IP addresses, comma-separated (`ProxyHeader.balancerAddress`).
    private func addresses(_ text: String, _ name: String) throws -> Set<String> {
        var found: Set<String> = []
        for part in text.split(separator: ",") {
            let given = part.trimmingCharacters(in: .whitespaces)
            guard let address = ProxyHeader.balancerAddress(given) else {
                throw UsageError(description: "\(name) takes numeric IP addresses (the balancer's, as connections come from it), not '\(given)'")
            }
            found.insert(address)
        }
        guard !found.isEmpty else { throw UsageError(description: "\(name) needs at least one address") }
        return found
    }

    /// A resume TTL: at most as long as SAVE's commit marks are kept, which tell RESUME that a
    /// unit was saved (past them a saved unit could be resumed and saved again).
    private func ttl(_ text: String, _ name: String) throws -> Int {
        let limit = (ChangeFeed.saveMarkMinutes - 10) * 60
        let value = try positive(text, name)
        guard value <= limit else { throw UsageError(description: "\(name) is at most \(limit) seconds (SAVE's commit marks, which RESUME checks, are kept an hour), not \(value)") }
        return value
    }

    /// An admin token: long enough not to be guessed, one line.
    private func token(_ text: String, _ name: String) throws -> String {
        let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard token.utf8.count >= 16, !token.contains(where: \.isWhitespace) else {
            throw UsageError(description: "\(name): an admin token is at least 16 characters with no spaces (openssl rand -hex 32 makes one)")
        }
        return token
    }

    private func nonNegative(_ text: String, _ name: String) throws -> Int {
        guard let value = Int(text), value >= 0 else { throw UsageError(description: "\(name) takes a whole number, 0 or more, not '\(text)'") }
        return value
    }

    private func positive(_ text: String, _ name: String) throws -> Int {
        guard let value = Int(text), value > 0 else { throw UsageError(description: "\(name) takes a whole number above 0, not '\(text)'") }
        return value
    }

    private func seconds(_ text: String, _ name: String) throws -> Double {
        guard let value = Double(text), value >= 0 else { throw UsageError(description: "\(name) takes seconds, 0 or more, not '\(text)'") }
        return value
    }

    /// Loopback addresses: the only ones served without authentication and TLS by default.
    var listensOnLoopback: Bool {
        ([listenHost] + (tlsListen.map { [$0.host] } ?? [])).allSatisfy(Session.isLoopback)
    }

    private func count(_ text: String, _ name: String) throws -> Int {
        guard let value = Int(text), value >= 0 else { throw UsageError(description: "\(name) takes a whole number, 0 or more, not '\(text)'") }
        return value
    }

    /// The environment with each `NAME_FILE` read into `NAME` (Docker secrets:
    /// `DATABASE_URL_FILE=/run/secrets/database_url`), its last line break dropped. A variable
    /// set directly wins over its file.
    static func withFiles(_ environment: [String: String]) throws -> [String: String] {
        var result = environment
        for (key, path) in environment where key.hasSuffix("_FILE") && key.count > 5 {
            let name = String(key.dropLast(5))
            guard name == "DATABASE_URL" || name.hasPrefix("RECORDSD_") || name.hasPrefix("RECORDS_"), environment[name] == nil else { continue }
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
                throw UsageError(description: "\(key): cannot read \(path)")
            }
            result[name] = text.hasSuffix("\n") ? String(text.dropLast()) : text
        }
        return result
    }

    /// True when any libpq connection variable is set.
    static func hasLibpqEnvironment(_ environment: [String: String]) -> Bool {
        ["PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE"].contains { environment[$0] != nil }
    }

    /// A database URL or conninfo without its password (or any other secret), for logs and
    /// INFO: read by libpq itself, so every form it accepts is covered.
    static func redacted(_ conninfo: String) -> String {
        Conninfo.describe(conninfo) ?? "(a connection string libpq cannot read)"
    }
}
