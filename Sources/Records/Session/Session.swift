import Postgres

/// Carries data lines to the client while a database step runs. `send` takes whole lines,
/// each ending in a line feed, that cannot pass for a status line (records are JSON objects);
/// it blocks while the client is slow to read (backpressure) and returns false once it is gone.
public protocol LineSink: AnyObject {
    func send(_ lines: [UInt8]) -> Bool
}

/// One client's session: parses each request line and runs it against the session's unit of
/// work. Pure of sockets: the server feeds it lines and performs the `Step` it returns.
///
/// Confinement: a session is used by one thread at a time, the event loop or, while a
/// `.database` step runs, the pool worker that runs it; the server never overlaps the two.
public final class Session {
    public enum Step {
        /// Answer now.
        case reply(Reply)
        /// Run on a pool worker with a connection, then answer. The sink carries data lines
        /// to the client while the step still runs (streamed results).
        case database((Connection, LineSink) -> Reply)
        /// Answer, then close the connection.
        case close(Reply)
        /// Take the following lines, up to one holding a single `.`, as data for the job (IMPORT).
        case collect(ImportJob)
        /// Answer now, then drop the following lines up to one holding a single `.`: the data
        /// of a refused IMPORT, which a client may have sent right behind it, never runs as
        /// commands.
        case skipData(Reply)
    }

    public let id: Int
    let context: ServerContext
    /// The client's address, for login throttling and logs.
    public let peer: String
    public internal(set) var unit = UnitOfWork()
    /// Whether this session must AUTH before anything but HELP, PING, AUTH and QUIT: decided
    /// when it starts (a user added later does not lock out sessions already open).
    public let mustAuthenticate: Bool
    /// The signed-in user, nil before AUTH.
    public internal(set) var user: (name: String, role: Role)?
    /// WATCHed entities, with the predicate their changes must match (nil: all).
    public internal(set) var watches: [String: Predicate?] = [:]

    public init(id: Int, context: ServerContext, peer: String = "-") {
        self.id = id
        self.context = context
        self.peer = peer
        self.mustAuthenticate = context.authenticationRequired && !context.authenticationDisabled
    }

    /// The role commands run with: the user's, or admin when no authentication is in force.
    var role: Role? { user?.role ?? (mustAuthenticate ? nil : .admin) }

    /// Who a log line is about.
    var who: String { user.map { "user \($0.name)" } ?? "no user" }

    public func handle(_ line: String) -> Step {
        let step = run(line)
        guard case .reply(let reply) = step, case .error(let code, let message) = reply.status,
              CommandParser.verb(of: line) == .import else { return step }
        return .skipData(.error(code, message + "; the data that follows, up to a line holding \".\", is skipped", details: reply.lines))
    }

    private func run(_ line: String) -> Step {
        let command: Command
        do {
            command = try CommandParser.parse(line)
        } catch {
            return .reply(error.reply)
        }
        let model = context.model  // one model for the whole command, even across a reload
        do throws(CommandError) {
            if let needed = command.verb.requiredRole {
                guard let role else {
                    throw CommandError(.auth, "sign in first: AUTH name password (before it, only HELP, PING, AUTH and QUIT)")
                }
                guard role >= needed else {
                    throw CommandError(.forbidden, "\(command.verb.rawValue) needs the \(needed.name) role; \(user?.name ?? "this session") is \(role.name)")
                }
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
        case .entities: return .reply(entities(model))
        case .describe(let name): return .reply(try describe(name, model: model))
        case .insert(let entity, let ref, let values): return .reply(try insert(entity, ref: ref, values, model: model))
        case .update(let entity, let id, let values): return try update(entity, id: id, values, model: model)
        case .delete(let entity, let id): return try delete(entity, id: id, model: model)
        case .upsert(let entity, let key, let values): return try upsert(entity, key: key, values, model: model)
        case .changes: return .reply(changes())
        case .save(let policy): return try save(policy, model: model)
        case .rollback:
            let dropped = unit.current.count
            unit.rollback()
            return .reply(.ok("rolled back \(dropped) pending change(s)"))
        case .nest:
            unit.nest()
            return .reply(.ok("nested scratchpad open (depth \(unit.depth))"))
        case .merge:
            guard unit.merge() else { throw CommandError(.validation, "no nested scratchpad to merge: NEST opens one") }
            return .reply(.ok("merged into parent (depth \(unit.depth), \(unit.current.count) pending)"))
        case .discard:
            guard unit.discard() else { throw CommandError(.validation, "no nested scratchpad to discard: NEST opens one") }
            return .reply(.ok("discarded (depth \(unit.depth), \(unit.current.count) pending)"))
        case .get(let entity, let id, let include): return try get(entity, id: id, include: include, model: model)
        case .find(let request): return try find(request, model: model)
        case .count(let entity, let predicate, let estimate): return try count(entity, predicate: predicate, estimate: estimate, model: model)
        case .explain(let request): return try explain(request, model: model)
        case .watch(let entity, let predicate): return try watch(entity, predicate: predicate, model: model)
        case .unwatch(let entity): return .reply(try unwatch(entity, model: model))
        case .export(let request): return try export(request, model: model)
        case .importData(let entity, let columns): return .collect(try importJob(entity, columns: columns, model: model))
        case .auth(let name, let password): return authenticate(name, password: password, model: model)
        case .user(let command): return manageUsers(command, model: model)
        }
    }

    /// Runs `body` on a pool connection; any error becomes the reply.
    func database(_ model: Model, _ body: @escaping (Connection) throws -> Reply) -> Step {
        streaming(model) { connection, _ in try body(connection) }
    }

    /// Like `database`, with the sink for data lines sent ahead of the reply.
    func streaming(_ model: Model, _ body: @escaping (Connection, LineSink) throws -> Reply) -> Step {
        .database { connection, sink in
            do {
                return try body(connection, sink)
            } catch {
                return ErrorMapping.map(error, model: model, connection: connection).reply
            }
        }
    }

    func entity(_ name: String, _ model: Model) throws(CommandError) -> Entity {
        if let entity = model.entity(named: name) { return entity }
        if let unserved = model.unserved.first(where: { $0.name.lowercased() == name.lowercased() }) {
            throw CommandError(.unknown, "'\(unserved.name)' is not served: \(unserved.reason)")
        }
        throw CommandError(.unknown, "unknown entity '\(name)': type ENTITIES for the list")
    }
}
