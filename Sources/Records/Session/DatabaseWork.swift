import Foundation
import Postgres
import RecordsProtocol

/// Carries data lines to the client while a database step runs. `send` takes whole lines,
/// each ending in a line feed, that cannot pass for a status line (records are JSON objects);
/// it blocks while the client is slow to read (backpressure) and returns false once it is gone.
public protocol LineSink: AnyObject {
    func send(_ lines: [UInt8]) -> Bool
    /// The client read nothing for the reply-stall time: `send` gave up waiting for it.
    var stalled: Bool { get }
    /// The server is stopping: `send` refused, so that the step ends and is answered.
    var stopping: Bool { get }
    /// The client left: `send` refused, and the reply reaches nobody.
    var left: Bool { get }
}

/// Work for a pool worker. It runs there with a leased connection and a snapshot of what it
/// needs (values only), never the session; what the session must remember (keys given to
/// pending inserts, versions read, a new pending change) comes back with the reply, as `apply`,
/// which the event loop runs on the session.
public struct DatabaseWork: Sendable {
    let body: @Sendable (WorkContext) -> WorkResult
    /// How long it may hold its connection, for the pool's scheduler.
    public enum Hold: Sendable, Equatable {
        /// Bounded by its statements' time limits.
        case statements
        /// As long as its client reads (FIND, EXPORT): slow by nature.
        case streams
        /// A sign-in: a short, bounded check that a new client must get even while slow
        /// clients hold the other connections.
        case signIn
    }
    public let hold: Hold
    /// Who it runs as: every work carries its session's identity, applied before it starts.
    let identity: Identity
    /// What the session takes back when the work could not run at all (the identity could
    /// not be taken): a WATCH registered when it was asked for is withdrawn.
    let undo: (@Sendable (Session) -> Void)?
    /// Counts the work's outcome (verb, reply, seconds, whether its client left a stream
    /// midway, what it streamed) when it finishes.
    let counted: (@Sendable (Finished) -> Void)?

    /// A finished work, for its metrics and log record.
    public struct Finished: Sendable {
        public var reply: Reply
        public var seconds: Double
        /// A stream whose client left midway.
        public var clientLeft = false
        /// Records streamed before the reply (FIND, EXPORT), and their bytes.
        public var streamedRows: Int?
        public var streamedBytes = 0
    }
    /// The same work as one statement and what its result answers, for a read that needs
    /// nothing else (no pending changes to apply first): reads pipelined by a client are sent
    /// to PostgreSQL together (`runPipelined`).
    let read: PipelinedRead?
    /// The same work as a SAVE that needs nothing first (no earlier COMMIT to ask about), for
    /// `runSaves` to run with other sessions' in one transaction.
    let save: GroupableSave?

    init(hold: Hold = .statements, identity: Identity, undo: (@Sendable (Session) -> Void)? = nil,
         counted: (@Sendable (Finished) -> Void)? = nil, read: PipelinedRead? = nil, save: GroupableSave? = nil,
         _ body: @escaping @Sendable (WorkContext) -> WorkResult) {
        self.hold = hold
        self.identity = identity
        self.undo = undo
        self.counted = counted
        self.read = read
        self.save = save
        self.body = body
    }

    /// Whether `runPipelined` can send it with others.
    public var isPipelinable: Bool { read != nil }

    /// What SAVEs of different sessions must share to go in one group: the identity their
    /// statements run as, and the model they were planned on. nil for other work.
    public var saveGroupKey: SaveGroupKey? {
        save.map { SaveGroupKey(identity: identity, model: ObjectIdentifier($0.model)) }
    }

    public func run(_ context: WorkContext) -> WorkResult {
        let started = Date(), streamedBefore = context.streamedBytes
        let result = runUncounted(context)
        // A stream whose client left ended early, whatever its reply says; other work did
        // what it was asked (a SAVE committed) even if its reply reaches nobody.
        counted?(Finished(reply: result.reply, seconds: Date().timeIntervalSince(started), clientLeft: hold == .streams && context.sink.left,
                          streamedRows: result.streamedRows, streamedBytes: context.streamedBytes - streamedBefore))
        return result
    }

    private func runUncounted(_ context: WorkContext) -> WorkResult {
        context.identity = identity
        do {
            try context.retryingOnce { try context.assumeIdentity() }
        } catch let error as CommandError {
            return WorkResult(reply: error.reply, apply: undo)
        } catch {
            return WorkResult(reply: .error(.unavailable, "PostgreSQL is unavailable (\((error as? PostgresError)?.message ?? "\(error)")); pending changes are kept: try again when it is back"),
                              apply: undo)
        }
        return body(context)
    }

    /// Runs reads in one libpq pipeline (one round trip), handing each answer to `deliver` in
    /// order as its result arrives (one result held at a time). Should the pipeline fail, the
    /// reads not yet answered run one by one instead (reads change nothing), so every error
    /// answers as it would alone.
    public static func runPipelined(_ works: [DatabaseWork], _ context: WorkContext, deliver: (WorkResult) -> Void) {
        guard works.count > 1, let identity = works.first?.identity,
              works.allSatisfy({ $0.read != nil && $0.identity == identity }) else { return works.forEach { deliver($0.run(context)) } }
        var answered = 0
        do {
            context.identity = identity
            try context.retryingOnce { try context.assumeIdentity() }
            var started = Date()
            try context.connection.pipelinePrepared(works.map { ($0.read!.sql, $0.read!.parameters) }) { index, result in
                let work = works[index]
                let answer = work.read!.finish(result)
                work.counted?(Finished(reply: answer.reply, seconds: Date().timeIntervalSince(started)))
                started = Date()
                answered += 1
                deliver(answer)
            }
        } catch {
            for work in works[answered...] { deliver(work.run(context)) }
        }
    }
}

/// A read as one prepared statement and what its result answers.
struct PipelinedRead: Sendable {
    var sql: String
    var parameters: [String?]
    var finish: @Sendable (QueryResult) -> WorkResult
}

/// What a database step produced: its reply, and what the session takes from it.
public struct WorkResult: Sendable {
    public var reply: Reply
    public var apply: (@Sendable (Session) -> Void)?
    /// Seconds the reply waits before it is sent (a failed AUTH), the session holding its
    /// next command meanwhile; no thread waits.
    public var delay: Double = 0
    /// Records streamed ahead of the reply (FIND, EXPORT), for the command's log record.
    public var streamedRows: Int?

    public init(reply: Reply, delay: Double = 0, streamedRows: Int? = nil, apply: (@Sendable (Session) -> Void)? = nil) {
        self.reply = reply
        self.delay = delay
        self.streamedRows = streamedRows
        self.apply = apply
    }
}
