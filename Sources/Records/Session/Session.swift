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
    }

    public let id: Int
    let context: ServerContext
    public internal(set) var unit = UnitOfWork()

    public init(id: Int, context: ServerContext) {
        self.id = id
        self.context = context
    }

    /// The count shown in prompts: pending changes in the innermost scratchpad.
    public var pendingCount: Int { unit.current.count }

    public func handle(_ line: String) -> Step {
        let command: Command
        do {
            command = try CommandParser.parse(line)
        } catch {
            return .reply(error.reply)
        }
        let model = context.model  // one model for the whole command, even across a reload
        do {
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
