import Records

/// What a connection's handler (`ClientConnection+Handler`) asks of the server it belongs to:
/// the loop's turns and the socket's interest, the shared pool and save groups, the session
/// table (CANCEL), durable state, watch pushes, the operators' board, and the end. Each is a
/// hop out of one connection into what all of them share; `Server` is the one host, and tests
/// drive a handler through its states with one of their own, without sockets.
protocol ConnectionHost: AnyObject {
    /// Stopping: no new command starts (an IMPORT under way takes its lines), and a session
    /// is handed off once its step is answered.
    var stopping: Bool { get }
    var metrics: Metrics { get }
    func now() -> UInt64
    /// A warning at most once a second, however often it happens (a client can cause it).
    func warnOnce(_ message: String)

    /// Reads what `transport` has into `framer` through the loop's one read buffer.
    func read(_ transport: Transport, into framer: inout LineFramer) -> TransportRead
    /// Runs `body` on the loop's next turn (more lines wait, or TLS holds more input).
    func nextTurn(_ body: @escaping () -> Void)
    /// What the loop waits for on the connection's socket from now on.
    func wait(_ connection: ClientConnection, for events: UInt32)
    /// TLS over the connection's socket (STARTTLS); nil when it could not be set up.
    func secureTransport(for connection: ClientConnection) -> Transport?

    /// Runs `works` in order as one pool job (or in a save group); the replies come back to
    /// `completed(bytes:)`.
    func submit(_ connection: ClientConnection, _ works: [BatchItem])
    /// An IMPORT's data chunk is ready and its COPY not yet running: start it on the pool.
    func startImport(_ state: ImportState, on connection: ClientConnection)
    /// The feed an IMPORT's lines go to; it wakes the connection when it has room again.
    func importFeed(for connection: ClientConnection) -> ImportFeed
    /// CANCEL from `connection`: stops session `target`'s running command if `key` is its own.
    func cancel(session target: Int, key: String, from connection: ClientConnection)

    /// --durable-units: writes the session's state when it changed since the last write.
    func persistIfChanged(_ connection: ClientConnection)
    /// A durable session's token is done with (`quit`: its state goes too).
    func durableSessionEnded(_ token: String, quit: Bool)
    /// Stopping: writes the session for RESUME (or says goodbye) and closes it once told.
    func farewell(_ connection: ClientConnection)
    /// Change events queued for the connection go out as pushed lines.
    func pushEvents(_ connection: ClientConnection)
    /// The session watches entities with row-level security: it joins their ledgers.
    func startLedgers(for connection: ClientConnection)
    /// The connection's line on the operators' board, when it changed.
    func publish(_ connection: ClientConnection)
    /// Closes the connection (`graceful`: what it was told is written first).
    func closeConnection(_ connection: ClientConnection, graceful: Bool)
}

/// The server's settings a connection reads at every line, copied once when it connects.
struct ConnectionSettings {
    /// The line length once signed in (before, the framer's is shorter).
    var maxLineLength: Int
    var maxReplyBytes: Int
    var durableUnits: Bool
    var resumeTTL: Int

    init(_ configuration: Server.Configuration) {
        maxLineLength = configuration.maxLineLength
        maxReplyBytes = configuration.maxReplyBytes
        durableUnits = configuration.durableUnits
        resumeTTL = configuration.resumeTTL
    }
}
