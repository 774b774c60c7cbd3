import Foundation
import Postgres
import RecordsProtocol

/// One client's session: parses each request line and runs it against the session's unit of
/// work. Pure of sockets: the server feeds it lines and performs the `Step` it returns.
///
/// Confinement: a session lives on the event loop. Database steps run on pool workers with a
/// snapshot, and their results are applied back on the loop (`WorkResult.apply`); while one
/// runs, the server gives the session no other line.
public final class Session {
    public enum Step {
        /// Answer now.
        case reply(Reply)
        /// Run on a pool worker, then answer. The sink carries data lines to the client while
        /// the step still runs (streamed results).
        case database(DatabaseWork)
        /// Answer, then close the connection.
        case close(Reply)
        /// Take the following lines, up to one holding a single `.`, as data for the job (IMPORT).
        case collect(ImportJob)
        /// Answer now, then drop the following lines up to one holding a single `.`: the data
        /// of a refused IMPORT, which a client may have sent right behind it, never runs as
        /// commands.
        case skipData(Reply)
        /// Answer, then switch the connection to TLS (the client's handshake follows).
        case startTLS(Reply)
        /// Stop what session `session` runs now, if `key` is its cancel key (the server holds
        /// the sessions), then answer; the answer never says whether it did.
        case cancel(session: Int, key: String)
    }

    public let id: Int
    /// What another connection must give to cancel this session's running command (`CANCEL
    /// KEY`): PostgreSQL's BackendKeyData, 128 random bits.
    /// Made when first asked for (most sessions never are: a key each cost every idle session
    /// its bytes and every connect a read of the system's random source).
    public private(set) lazy var cancelKey = Secret.hex128()
    let context: ServerContext
    /// The client's address, for login throttling, the loopback rule for AUTH, and logs.
    public private(set) var peer: String
    public internal(set) var unit = UnitOfWork() { didSet { stateVersion &+= 1 } }
    /// What the names of recent lines' `attr=value` pairs name (a load repeats them).
    var fieldPlans = FieldPlans()
    /// The bytes around the values of recent INSERT lines (a load repeats them).
    var insertShapes = InsertShapes()
    /// Moves whenever what a hand-off keeps changes (the unit, watches, format, an unsettled
    /// SAVE, the next SAVE's mark): with --durable-units the server writes the state when it
    /// differs from the version last written. (`didSet` without `oldValue` keeps edits in place.)
    public private(set) var stateVersion = 0
    /// The commit mark the next SAVE writes (`records.save_marks`), chosen ahead so that a
    /// durable state names it: a session resumed after a crash whose SAVE committed, unanswered,
    /// finds the mark and knows its unit was saved.
    var nextSaveMark = Int64.random(in: 1...Int64.max) { didSet { stateVersion &+= 1 } }
    /// The state versions just before and after the last committed SAVE emptied the unit: a
    /// durable state written at `before` needs no write for it, since its mark (now in
    /// `records.save_marks`) already tells RESUME the unit was saved.
    public internal(set) var lastSave: (before: Int, after: Int)?
    /// A SAVE found this session resumed on another connection (its mark fenced): the server
    /// closes it, and does not write its state again.
    public internal(set) var movedAway = false
    /// A RESUME on a durable server wrote the state under this new token (with its pending
    /// count), for the server to take (`takeResumedDurably`) before the reply goes out.
    var resumedDurably: (token: String, pending: Int)?

    public func takeResumedDurably() -> (token: String, pending: Int)? {
        defer { resumedDurably = nil }
        return resumedDurably
    }
    /// Whether this session must AUTH before anything but HELP, PING, AUTH and QUIT: decided
    /// when it starts (a user added later does not lock out sessions already open).
    public let mustAuthenticate: Bool
    /// The connection is encrypted (TLS from the start, or after STARTTLS). Set by the server.
    public var secure = false
    /// The signed-in user, nil before AUTH.
    public internal(set) var user: (name: String, role: Role)? {
        didSet { if (oldValue == nil) != (user == nil) { context.metrics.signedIn(user == nil ? -1 : 1) } }
    }
    /// What a WATCH on an entity with row-level security read of the visible keys, for the
    /// server to take (`takeWatchSeed`).
    var watchSeeds: [String: WatchSeed] = [:]

    public func takeWatchSeed(_ entity: String) -> WatchSeed? { watchSeeds.removeValue(forKey: entity) }

    /// FORMAT JSON: descriptive replies as one JSON object a line.
    public internal(set) var jsonReplies = false { didSet { stateVersion &+= 1 } }
    /// WATCHed entities, with the predicate their changes must match (nil: all).
    public internal(set) var watches: [String: Predicate?] = [:] { didSet { stateVersion &+= 1 } }
    /// A SAVE whose COMMIT got no answer and whose outcome PostgreSQL could not yet tell: the
    /// next SAVE asks about it first, so the unit is never written twice.
    var uncertainSave: UncertainCommit? { didSet { stateVersion &+= 1 } }

    /// The client's own address, as a trusted balancer's PROXY header gave it (the socket's
    /// peer is the balancer); before the first command.
    public func proxied(for client: String) {
        peer = client
    }

    public init(id: Int, context: ServerContext, peer: String = "-") {
        self.id = id
        self.context = context
        self.peer = peer
        self.mustAuthenticate = context.authenticationRequired && !context.authenticationDisabled
    }

    /// The role commands run with: the user's, or admin when no authentication is in force.
    var role: Role? { user?.role ?? (mustAuthenticate ? nil : .admin) }

    /// The PostgreSQL role the signed-in user's work runs as, when the user has one.
    public internal(set) var databaseRole: String?
    /// When the signed-in user was added (`Users.Grant.since`).
    var signedInSince: String?

    /// Who this session's database work runs as, for row-level security.
    public var identity: Identity {
        if let user { return Identity(user: user.name, role: user.role.name, databaseRole: databaseRole) }
        return role == nil ? .anonymous : .server
    }

    /// A loopback address (`127.0.0.0/8`, `::1`, or IPv4-mapped loopback), as `getnameinfo`
    /// prints it.
    public static func isLoopback(_ host: String) -> Bool {
        let v4 = host.hasPrefix("::ffff:") ? String(host.dropFirst(7)) : host
        return v4.hasPrefix("127.") || host == "::1" || host == "localhost"
    }

    /// The answer to a verb that needs a role, before sign-in.
    static let signInFirst: String = {
        let open = Verb.allCases.filter { $0.requiredRole == nil }.map(\.rawValue)
        return "sign in first: AUTH name password (before it, only \(open.dropLast().joined(separator: ", ")) and \(open.last!))"
    }()

    /// Who a log line is about.
    var who: String { user.map { "user \($0.name)" } ?? "no user" }

    public func handle(_ line: String) -> Step { handle(line, verb: Verb.of(line)) }

    /// `verb`: `Verb.of(line)`, read once a line (counting, the checks before parsing, IMPORT's
    /// data).
    public func handle(_ line: String, verb: Verb?) -> Step {
        currentVerb = verb?.rawValue ?? "unknown"
        lineForLog = line
        let started = DispatchTime.now().uptimeNanoseconds
        let step = run(line, verb: verb)
        switch step {
        case .reply(let reply), .skipData(let reply):
            // Answered on the loop: counted and timed here (database work is, where it ends).
            let outcome = Metrics.outcome(reply)
            let seconds = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
            context.metrics.command(currentVerb, outcome: outcome, seconds: seconds)
            Self.logTimed(outcome: outcome, seconds: seconds,
                          verb: currentVerb, line: line, slow: context.slowCommandMilliseconds, session: id,
                          who: CommandLogFields(user: user?.name, remoteAddress: peer), reply: reply)
        default: break
        }
        guard case .reply(let reply) = step, case .error(let code, let message) = reply.status,
              verb == .import else { return step }
        return .skipData(.error(code, message + "; the data that follows, up to a line holding \".\", is skipped", details: reply.lines))
    }

    /// A signed-in user's rights are the users table's now: removed, the session signs out and
    /// its watches end; given another role or database role, it has those. Checked at every
    /// command, and before the session is told of a change it watches.
    public func followUsersTable() -> Reply? {
        guard let signedIn = user, let roles = context.roles else { return nil }
        guard let current = roles[signedIn.name], signedInSince == nil || current.since == signedInSince else {
            user = nil
            databaseRole = nil
            signedInSince = nil
            close()
            // What the removed user left pending is nobody's to save: whoever signs in next
            // would otherwise take it over.
            let dropped = unit.heldCount > 0
            unit.rollback()
            Log.info("user \(Log.quoted(signedIn.name)) was removed: session signed out", session: id)
            return .error(.auth, "user \(signedIn.name) no longer exists: this session is signed out"
                          + (dropped ? " and its pending changes dropped" : "") + "; AUTH again")
        }
        if current.role != signedIn.role { user = (signedIn.name, current.role) }
        if current.databaseRole != databaseRole { databaseRole = current.databaseRole }
        return nil
    }

    /// Counts a database work under the verb that started it (SAVE's time too).
    func counter() -> @Sendable (DatabaseWork.Finished) -> Void {
        let metrics = context.metrics, verb = currentVerb, line = lineForLog, session = id
        let slow = context.slowCommandMilliseconds
        let who = CommandLogFields(user: user?.name, remoteAddress: peer)
        return { finished in
            let outcome = finished.clientLeft ? Metrics.clientLeft : Metrics.outcome(finished.reply)
            metrics.command(verb, outcome: outcome, seconds: finished.seconds)
            if verb == "SAVE" { metrics.save(seconds: finished.seconds) }
            Self.logTimed(outcome: outcome, seconds: finished.seconds, verb: verb, line: line, slow: slow, session: session, who: who,
                          reply: finished.reply, streamed: (finished.streamedRows, finished.streamedBytes))
        }
    }

    /// Who ran a command, for its log record.
    struct CommandLogFields: Sendable {
        var user: String?
        var remoteAddress: String
    }

    /// A command's debug line with its duration, or a warning with its (redacted) text when it
    /// took `--log-slow` milliseconds or more. Under `--log-format json` each is a record of
    /// fields: verb, outcome, duration_ms, user, remote_addr, rows and bytes of its reply.
    static func logTimed(outcome: String, seconds: Double, verb: String, line: String, slow: Int?, session: Int,
                         who: @autoclosure () -> CommandLogFields? = nil, reply: Reply? = nil,
                         streamed: (rows: Int?, bytes: Int) = (nil, 0)) {
        let milliseconds = Int((seconds * 1000).rounded())
        let isSlow = slow.map { milliseconds >= $0 } ?? false
        guard isSlow || Log.level <= .debug else { return }
        func fields() -> [(String, JSON.Value)] {
            var fields: [(String, JSON.Value)] = [("verb", .string(verb)), ("outcome", .string(outcome)), ("duration_ms", .int(milliseconds))]
            if let who = who() { fields += [("user", who.user.map(JSON.Value.string) ?? .null), ("remote_addr", .string(who.remoteAddress))] }
            if let reply {
                // A stream's records went ahead of its reply; other replies carry their lines.
                fields.append(("rows", .int(streamed.rows ?? reply.lines.count)))
                fields.append(("bytes", .int(reply.lines.reduce(streamed.bytes + reply.statusLine.utf8.count + 2) { $0 + $1.utf8.count + 2 })))
            }
            if isSlow { fields.append(("command", .string(loggable(line, quoted: false)))) }
            return fields
        }
        if isSlow {
            Log.event(.warning, "slow command, \(milliseconds) ms, \(outcome): \(loggable(line))", session: session, fields: fields())
        } else {
            Log.event(.debug, "\(verb) \(outcome) in \(milliseconds) ms", session: session, fields: fields())
        }
    }

    /// A line as logs may show it: a verb that carries a secret (AUTH, USER) shows only its
    /// verb; long lines are cut. Made only when a slow command is logged, never per command.
    /// `quoted`: as a log sentence shows it; a JSON field holds the text itself.
    static func loggable(_ line: String, quoted: Bool = true) -> String {
        func quote(_ text: String) -> String { quoted ? Log.quoted(text) : text }
        guard let verb = Verb.of(line) else { return quote(String(line.prefix(40))) }
        if verb.facts.carriesSecret { return verb.rawValue + " ..." }
        return quote(line.count > 500 ? String(line.prefix(500)) + "..." : line)
    }

    /// The verb of the line being run, for the metrics of the work it starts and the operators' board.
    public internal(set) var currentVerb = "unknown"
    /// The line being run, for a slow command's log line (`currentText` redacts it).
    var lineForLog = ""

    /// The length of the line being run, for the byte limit of the unit of work.
    var lineBytes = 0

    private func run(_ line: String, verb: Verb?) -> Step {
        lineBytes = line.utf8.count
        // A password never crosses another host's network in clear: refused before it is read.
        if let verb, verb == .auth || verb == .user, !secure, context.security.remoteAuthNeedsTLS, !Self.isLoopback(peer) {
            let how = context.tlsAvailable ? "send STARTTLS first, or connect to the TLS port" : "this server has no TLS configured"
            return .reply(.error(.auth, "\(verb.rawValue) from another host needs TLS: \(how); the line was not read"))
        }
        if let signedOut = followUsersTable() { return .reply(signedOut) }
        // Before sign-in only the verb is read: the rest of a line from an unknown client is
        // never parsed unless the verb is one it may use.
        if role == nil {
            guard let verb else { return .reply(CommandParser.notAVerb(line).reply) }
            if verb.requiredRole != nil {
                return .reply(.error(.auth, Self.signInFirst))
            }
        }
        let command: Command
        do {
            command = try insertShapes.parse(line, verb: verb)
        } catch {
            return .reply(error.reply)
        }
        let model = context.model  // one model for the whole command, even across a reload
        do throws(CommandError) {
            if let needed = command.verb.requiredRole {
                guard let role else {
                    throw CommandError(.auth, Self.signInFirst)
                }
                guard role >= needed else {
                    throw CommandError(.forbidden, "\(command.verb.rawValue) needs the \(needed.name) role; \(user?.name ?? "this session") is \(role.name)")
                }
            }
            if uncertainSave != nil && command.changesTheUnit {
                // The unit must stay the one whose COMMIT got no answer until that is settled:
                // edits mixed in would be dropped if it committed, or written twice.
                throw CommandError(.unavailable, "the last SAVE got no answer to its COMMIT and is not settled yet: SAVE again to settle it (nothing is written twice), or ROLLBACK to drop the pending changes")
            }
            return try execute(command, model: model)
        } catch {
            return .reply(error.reply)
        }
    }

    private func execute(_ command: Command, model: Model) throws(CommandError) -> Step {
        switch command {
        case .help(let verb): return .reply(try help(verb))
        case .ping(let message): return .reply(.ok(message ?? "PONG"))
        case .quit:
            let dropped = unit.current.count
            return .close(.ok(dropped == 0 ? "bye" : "bye; \(dropped) pending change(s) dropped"))
        case .info: return .reply(info())
        case .format(let json):
            jsonReplies = json
            return .reply(.ok(json ? "format json" : "format text"))
        case .startTLS:
            guard context.tlsAvailable else { throw CommandError(.denied, "TLS is not configured on this server (--tls-cert, --tls-key)") }
            guard !secure else { throw CommandError(.denied, "this connection already uses TLS") }
            return .startTLS(.ok("begin TLS"))
        case .entities: return .reply(jsonReplies ? entitiesJSON(model) : entities(model))
        case .describe(let name): return .reply(jsonReplies ? describeJSON(try entity(name, model)) : try describe(name, model: model))
        case .insert(let entity, let ref, let values): return .reply(try insert(entity, ref: ref, values, model: model))
        case .update(let entity, let id, let values): return try update(entity, address: id, values, model: model)
        case .delete(let entity, let id): return try delete(entity, address: id, model: model)
        case .updateWhere(let entity, let predicate, let values, let text):
            return try bulk(entity, predicate: predicate, values: values, text: text, model: model)
        case .deleteWhere(let entity, let predicate, let text):
            return try bulk(entity, predicate: predicate, values: nil, text: text, model: model)
        case .upsert(let entity, let ref, let key, let values): return try upsert(entity, ref: ref, key: key, values, model: model)
        case .changes(let countOnly): return .reply(countOnly ? changeCount() : jsonReplies ? changesJSON() : changes())
        case .save(let policy, let key): return try save(policy, key: key, model: model)
        case .rollback:
            let dropped = unit.current.count
            unit.rollback()
            // The changes are dropped: whether the SAVE that got no answer committed them no
            // longer decides anything in this session.
            let forgot = uncertainSave != nil
            uncertainSave = nil
            return .reply(.ok("rolled back \(dropped) pending change(s)" + (forgot ? "; the SAVE whose COMMIT got no answer is no longer followed" : "")))
        case .nest:
            guard unit.depth < UnitOfWork.maxDepth else {
                throw CommandError(.limit, "at most \(UnitOfWork.maxDepth) nested scratchpads: MERGE or DISCARD one first")
            }
            guard unit.heldBytes + unit.current.bytes <= context.limits.maxPendingBytes else {
                throw CommandError(.limit, "a nested scratchpad copies \(unit.current.bytes) bytes of values, past the limit of \(context.limits.maxPendingBytes) held: SAVE, MERGE or DISCARD first")
            }
            guard unit.heldCount + unit.current.count <= context.limits.maxPendingChanges else {
                throw CommandError(.limit, "a nested scratchpad copies the \(unit.current.count) pending changes, past the limit of \(context.limits.maxPendingChanges) held: SAVE, MERGE or DISCARD first")
            }
            unit.nest()
            return .reply(.ok("nested scratchpad open (depth \(unit.depth))"))
        case .merge:
            guard unit.merge() else { throw CommandError(.validation, "no nested scratchpad to merge: NEST opens one") }
            return .reply(.ok("merged into parent (depth \(unit.depth), \(unit.current.count) pending)"))
        case .discard:
            guard unit.discard() else { throw CommandError(.validation, "no nested scratchpad to discard: NEST opens one") }
            return .reply(.ok("discarded (depth \(unit.depth), \(unit.current.count) pending)"))
        case .get(let entity, let id, let include, let orders): return try get(entity, address: id, include: include, includeOrder: orders, model: model)
        case .find(let request): return try find(request, model: model)
        case .count(let entity, let predicate, let estimate): return try count(entity, predicate: predicate, estimate: estimate, model: model)
        case .explain(let request): return try explain(request, model: model)
        case .aggregate(let request): return try aggregate(request, model: model)
        case .explainAggregate(let request):
            let query = try QueryBuilder.aggregate(request, model: model)
            return try explain(request.entity, sql: query.sql, parameters: query.parameters, model: model)
        case .watch(let entity, let predicate): return try watch(entity, predicate: predicate, model: model)
        case .unwatch(let entity): return .reply(try unwatch(entity, model: model))
        case .export(let request): return try export(request, model: model)
        case .importData(let entity, let columns): return .collect(try importJob(entity, columns: columns, model: model))
        case .auth(let name, let password): return authenticate(name, password: password, model: model)
        case .user(let command): return manageUsers(command, model: model)
        case .resume(let token): return try resume(token)
        case .cancel(let session, let key):
            guard let session, let key else { return .reply(.ok("s\(id) \(cancelKey)")) }
            return .cancel(session: session, key: key)
        }
    }

    /// A database step: `body` runs on a pool worker; an error it throws becomes the reply.
    func database(_ model: Model, hold: DatabaseWork.Hold = .statements, undo: (@Sendable (Session) -> Void)? = nil,
                  read: PipelinedRead? = nil, _ body: @escaping @Sendable (WorkContext) throws -> WorkResult) -> Step {
        .database(DatabaseWork(hold: hold, identity: identity, undo: undo, counted: counter(), read: read) { context in
            do {
                return try body(context)
            } catch {
                return WorkResult(reply: ErrorMapping.map(error, model: model, connection: context.connection).reply)
            }
        })
    }

    func entity(_ name: String, _ model: Model) throws(CommandError) -> Entity {
        if let entity = model.entity(named: name) { return entity }
        if let unserved = model.unserved.first(where: { $0.name.lowercased() == name.lowercased() }) {
            throw CommandError(.unknown, "'\(unserved.name)' is not served: \(unserved.reason)")
        }
        throw CommandError(.unknown, "unknown entity '\(name)': type ENTITIES for the list")
    }

    /// What a work needs of the unit to build a read's view, taken on the loop.
    var snapshot: UnitSnapshot { UnitSnapshot(changes: unit.current, assigned: unit.assigned) }
}

/// The unit of work as a value a worker may hold.
struct UnitSnapshot: Sendable {
    var changes: ChangeSet
    var assigned: [String: AssignedKey]
}
