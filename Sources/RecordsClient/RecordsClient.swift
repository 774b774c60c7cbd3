import Dispatch
import Foundation

/// A connection to recordsd for programs: async requests, replies split and checked, records
/// decoded with `Codable`. One connection is one session with its own unit of work; requests
/// on it run one after another (`pipeline` sends several before reading their replies).
///
/// Blocking socket I/O runs on the client's own serial queue, never on Swift's cooperative
/// threads; everything the queue owns is touched only there.
public final class RecordsClient: @unchecked Sendable {  // `connection` confined to `queue`
    let queue: DispatchQueue
    var connection: LineConnection? {
        didSet { shutdownLock.withLock { shutdownConnection = connection } }
    }
    /// The connection, for `shutdownBoth` from another thread (a watch stream's end).
    private let shutdownLock = NSLock()
    private var shutdownConnection: LineConnection?
    var shutdownHandle: LineConnection? { shutdownLock.withLock { shutdownConnection } }
    /// The server's first line (`+OK recordsd 0.1.0 ready ...`).
    public internal(set) var banner = ""
    /// How to connect and sign in again when the server hands the session off (on `queue`).
    var endpoint: Endpoint?
    /// Told `resumed: N pending change(s)` when the session followed a handoff (on `queue`).
    var resumeHandler: (@Sendable (String) -> Void)?
    /// The token of a session whose RESUME found no server yet (on `queue`): the next request
    /// resumes it first.
    var strandedToken: String?
    /// How to stop a request from another connection when its Task is cancelled; nil from a
    /// server without CANCEL. Under `cancelLock`: read from the cancelling thread while the
    /// queue is busy with the request.
    var cancelRequest: CancelRequest? {
        get { cancelLock.withLock { storedCancelRequest } }
        set { cancelLock.withLock { storedCancelRequest = newValue } }
    }
    private let cancelLock = NSLock()
    private var storedCancelRequest: CancelRequest?

    private init(label: String) {
        queue = DispatchQueue(label: "RecordsClient " + label)
    }

    /// Connects to `records://[user[:password]@]host[:port]` (port 7878 by default) and signs in
    /// when the URL names a user. `recordss://` is TLS from the first byte (the server's
    /// `--tls-listen` port); `records://...?tls=require` switches to TLS with STARTTLS. TLS
    /// checks the server's certificate against `caFile`'s CAs, else the system's.
    public static func connect(_ url: String, caFile: String? = nil, connectTimeout: Double? = nil) async throws -> RecordsClient {
        let address = try RecordsURL(url)
        var options = LineConnection.Options(connectTimeout: connectTimeout)
        options.security = address.security(caFile: caFile)
        let credentials = address.user.map { (user: $0, password: address.password ?? "") }
        return try await connect(host: address.host ?? "127.0.0.1", port: address.port ?? RecordsURL.defaultPort,
                                 options: options, credentials: credentials)
    }

    public static func connect(host: String, port: Int, options: LineConnection.Options = .init()) async throws -> RecordsClient {
        try await connect(host: host, port: port, options: options, credentials: nil)
    }

    /// Connects and, given credentials, signs in in the same turn of the client's queue: the
    /// server gives a connection `--sign-in-timeout` seconds from its accept to sign in, and a
    /// hop through Swift's cooperative threads in between (all of them busy, in a program
    /// under load) must not spend them.
    static func connect(host: String, port: Int, options: LineConnection.Options,
                        credentials: (user: String, password: String)?) async throws -> RecordsClient {
        let client = RecordsClient(label: "\(host):\(port)")
        try await client.onQueue { () throws(RecordsError) in
            let connection = try LineConnection(host: host, port: port, options: options)
            if let credentials {
                do throws(RecordsError) {
                    _ = try connection.signIn(user: credentials.user, password: credentials.password).checked()
                } catch {
                    connection.close()
                    throw error
                }
            }
            client.connection = connection
            client.banner = connection.banner
            client.endpoint = Endpoint(host: host, port: port, options: options)
            client.endpoint?.credentials = credentials
            client.cancelRequest = CancelRequest(asking: connection, host: host, port: port, options: options)
        }
        await client.askForJSON()
        return client
    }

    func onQueue<T: Sendable>(_ work: @escaping @Sendable () throws(RecordsError) -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async {
                do throws(RecordsError) {
                    continuation.resume(returning: try work())
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    // MARK: - Raw requests

    /// Sends one line and returns its reply as sent (an `-ERR` is not thrown).
    public func send(_ line: String) async throws -> WireReply {
        try await pipeline([line])[0]
    }

    /// Sends every line, then reads their replies: one round trip for all. A Task cancelled
    /// before the call sends nothing; one cancelled while the server runs it asks the server
    /// to stop it (`CANCEL`, from a connection of its own): the call then throws
    /// `CancellationError`, the session and its unit of work as they were before it.
    public func pipeline(_ lines: [String]) async throws -> [WireReply] {
        for line in lines where line.contains("\n") || line.contains("\r") {
            throw RecordsError.invalidRequest("a request is one line: \(line.prefix(40))...")
        }
        try Task.checkCancellation()
        let replies = try await withTaskCancellationHandler {
            try await send(lines)
        } onCancel: {
            requestCancel()
        }
        if Task.isCancelled, replies.contains(where: { $0.code == .cancelled }) { throw CancellationError() }
        return replies
    }

    private func send(_ lines: [String]) async throws -> [WireReply] {
        try await onQueue { [self] () throws(RecordsError) in
            var replies: [WireReply] = []
            var resumed = false
            while true {
                guard let connection else {
                    // A session left between servers: resumed before anything is sent.
                    guard replies.isEmpty, !resumed, let token = strandedToken else { throw .connection("closed") }
                    try resume(token)
                    resumed = true
                    continue
                }
                // A session that has a token (--durable-units; its notice may still be unread)
                // may have lost its server while idle: found closed before anything is sent, it
                // is resumed first (one poll, no wait).
                if replies.isEmpty, !resumed, connection.closedByServer(), let token = connection.handOffToken {
                    try resume(token)
                    resumed = true
                    continue
                }
                do throws(RecordsError) {
                    try connection.write(lines[replies.count...].map { $0 + "\n" }.joined())
                    while replies.count < lines.count { replies.append(try connection.readReply()) }
                    return replies
                } catch {
                    // The server stopped and handed the session off: the lines not answered
                    // never ran; they go again on the resumed session. After a crash (a durable
                    // session's token) the session is resumed, but an unanswered line may have
                    // run: that is said, not guessed.
                    if case .connection = error, connection.handOffRevoked {
                        throw RecordsError.connection("the server went away and could not keep this session (its state could not be written to PostgreSQL): its pending changes are lost, and this request may or may not have run")
                    }
                    guard !resumed, case .connection = error, let token = Self.handOffToken(connection) else { throw error }
                    let stopped = connection.serverStopped
                    try resume(token)
                    resumed = true
                    guard stopped else {
                        throw RecordsError.connection("the server went away during this request, which may or may not have run; the session was resumed on another server: check changes()")
                    }
                }
            }
        }
    }

    /// Asks the server, on a connection of its own, to stop what this session runs now (from
    /// any thread: a Task's cancellation handler). Best effort, as PostgreSQL's cancel is.
    func requestCancel() {
        guard let request = cancelRequest else { return }
        DispatchQueue.global().async { request.send() }
    }

    /// `handler` is told the server's `resumed: N pending change(s)` each time this session
    /// follows a handoff to another server (a restart behind a balancer), on the client's queue.
    public func onResume(_ handler: @escaping @Sendable (String) -> Void) async {
        _ = try? await onQueue { [self] () throws(RecordsError) in resumeHandler = handler }
    }

    /// Sends a request and throws its error, if it is one.
    @discardableResult
    public func request(_ line: String) async throws -> WireReply {
        try await send(line).checked()
    }

    /// Lines the server pushed on this connection so far (a WATCH on it), oldest first.
    public func takePushed() async throws -> [String] {
        try await onQueue { [self] () throws(RecordsError) in
            guard let connection else { return [] }
            defer { connection.pushed.removeAll() }
            return connection.pushed
        }
    }

    /// Ends the session (QUIT) and the connection. Pending changes are dropped by the server.
    public func close() async {
        _ = try? await onQueue { [self] () throws(RecordsError) in
            if let connection {
                try? connection.write("QUIT\n")
                connection.close()
            }
            connection = nil
            strandedToken = nil
        }
    }

    /// Whether the session is between servers: its RESUME found none yet, and the next
    /// request tries again.
    public var isWaitingForServer: Bool {
        get async { (try? await onQueue { [self] () throws(RecordsError) in strandedToken != nil }) ?? false }
    }

    // MARK: - Sign-in

    public func auth(user: String, password: String) async throws {
        // AUTH takes raw words; a quoted word is unescaped as a string.
        try await onQueue { [self] () throws(RecordsError) in
            guard let connection else { throw .connection("closed") }
            _ = try connection.signIn(user: user, password: password).checked()
        }
        _ = try? await onQueue { [self] () throws(RecordsError) in endpoint?.credentials = (user, password) }
        await askForJSON()
    }

    /// FORMAT JSON: SAVE's ids, CHANGES and conflicts come as JSON, read without parsing
    /// English. Refused before sign-in on a server with users; `auth` asks again.
    func askForJSON() async {
        _ = try? await send("FORMAT JSON")
    }
}

extension RecordsClient {
    /// Unblocks a read in progress on the queue (a watch stream ended): `shutdown` is safe from
    /// any thread, unlike close.
    func queueFreeShutdown() {
        shutdownHandle?.shutdownBoth()
    }
}
