import Records

/// What a client connection is doing, and what the server should do next with it. A value
/// without I/O: the server feeds it events (a line arrived, a step finished, the peer closed)
/// and performs what it answers; tested without sockets (`ConnectionStateMachineTests`).
struct ConnectionStateMachine: Equatable {
    enum State: Equatable {
        /// From a trusted balancer (--proxy-from): its first line is a PROXY header naming the
        /// client.
        case awaitingProxyHeader
        /// Taking request lines.
        case reading
        /// A step runs on the pool: no new line is taken until its reply is back, so replies
        /// stay in order.
        case awaitingDatabase
        /// An IMPORT's data lines, up to `.`, go to its COPY.
        case importing
        /// A refused IMPORT's data lines are dropped, up to `.`.
        case skippingData
        /// STARTTLS was answered: once its reply is sent, the connection changes transport.
        /// Nothing is read meanwhile; what the client sent behind STARTTLS is dropped.
        case switchingToTLS
        /// What is buffered is answered and sent, then the connection closes (QUIT, idle,
        /// shutdown).
        case closing
        case closed
    }

    /// What the server does with one framed event.
    enum Route: Equatable {
        /// A balancer's PROXY header (or what came in its place).
        case proxyHeader(LineFramer.Event)
        case run(String)
        /// An IMPORT data line (or its `.`).
        case gather(LineFramer.Event)
        /// Dropped (a refused IMPORT's data).
        case drop
        case tooLong(Int)
        case invalid(String)
    }

    /// What a command turned into (the kinds of `Session.Step`).
    enum Step: Equatable {
        case reply, close, skipData, collect, database, startTLS
        /// QUIT: `close`, and nothing is kept to resume.
        case quit
    }

    private(set) var state: State
    /// The peer sent FIN: what it sent is answered, then the connection closes.
    private(set) var peerClosed = false
    /// The running step has been slow: replies held behind it go out without waiting.
    private(set) var flushHeld = false
    /// The step is writing the session's state (--durable-units): the replies it covers are
    /// acknowledged only once it is written, so none goes out before, however slow.
    private(set) var persisting = false
    /// The session ended as with QUIT (by the client, or an operator): its durable state goes,
    /// nothing is kept to resume.
    private(set) var quit = false
    /// Shutting down: the session was handed off or told goodbye (that happens once).
    private(set) var farewelled = false
    /// Told to close while a step ran: it closes once the step is answered.
    private(set) var closesAfterStep = false
    /// The epoll interest last set.
    private(set) var interest: UInt32 = 0
    /// Past this much unsent output the client is not read (backpressure).
    let highWater: Int

    init(highWater: Int, awaitsProxyHeader: Bool = false) {
        self.highWater = highWater
        self.state = awaitsProxyHeader ? .awaitingProxyHeader : .reading
    }

    var isBusy: Bool { state == .awaitingDatabase }
    var isClosed: Bool { state == .closed }
    var isClosing: Bool { state == .closing }

    // MARK: - Lines

    /// Whether another line may be taken now.
    func takesLine(pendingOutput: Int, importPaused: Bool) -> Bool {
        switch state {
        case .awaitingProxyHeader, .reading, .importing, .skippingData: return !importPaused && pendingOutput < highWater
        case .awaitingDatabase, .switchingToTLS, .closing, .closed: return false
        }
    }

    mutating func route(_ event: LineFramer.Event) -> Route {
        switch state {
        case .awaitingProxyHeader:
            state = .reading
            return .proxyHeader(event)
        case .importing:
            return .gather(event)
        case .skippingData:
            if case .line(".") = event { state = .reading }
            return .drop
        default:
            switch event {
            case .line(let line): return .run(line)
            case .tooLong(let length): return .tooLong(length)
            case .invalid(let reason): return .invalid(reason)
            }
        }
    }

    /// The command just run became `step`.
    mutating func stepped(_ step: Step) {
        guard state != .closed else { return }
        switch step {
        case .reply: break
        case .close: state = .closing
        case .quit:
            state = .closing
            quit = true
        case .skipData: state = .skippingData
        case .collect: state = .importing
        case .database: startedDatabase()
        case .startTLS: state = .switchingToTLS
        }
    }

    /// STARTTLS's reply is sent: the server changes the transport now.
    func switchesTransport(pendingOutput: Int) -> Bool {
        state == .switchingToTLS && pendingOutput == 0
    }

    /// The transport is TLS now (its handshake comes with the next reads).
    mutating func switchedTransport() {
        if state == .switchingToTLS { state = .reading }
    }

    mutating func startedDatabase() {
        guard state != .closed else { return }
        state = .awaitingDatabase
        flushHeld = false
    }

    /// The session's state is being written (--durable-units): like a step, and what it
    /// answered so far waits for it.
    mutating func startedPersisting() {
        guard state != .closed else { return }
        startedDatabase()
        persisting = true
    }

    /// A step's job writes the session's state before the step runs: what was answered before
    /// waits for the write, not for the step.
    mutating func writesAhead() {
        if state == .awaitingDatabase { persisting = true }
    }

    /// That write is done (the step goes on).
    mutating func wroteAhead() {
        persisting = false
    }

    /// The IMPORT's `.` arrived: its COPY's reply is awaited, or (`answered`) already sent.
    mutating func importEnded(answered: Bool) {
        guard state == .importing else { return }
        if answered { state = .reading } else { startedDatabase() }
    }

    /// A step's reply is back; while the server stops, or when told to close meanwhile, the
    /// connection closes after it.
    mutating func databaseFinished(stopping: Bool) {
        guard state == .awaitingDatabase else { return }
        state = stopping || closesAfterStep ? .closing : .reading
        flushHeld = false
        persisting = false
    }

    /// The running step has lasted a tick: replies held behind it go out.
    mutating func stepIsSlow() {
        if state == .awaitingDatabase && !persisting { flushHeld = true }
    }

    mutating func peerDidClose() { peerClosed = true }

    /// Ended by an operator: as QUIT, once a running step is answered.
    mutating func quitWhenIdle() {
        quit = true
        closeWhenIdle()
    }

    // MARK: - Shutdown

    /// Stopping: whether the session is handed off (or told goodbye) now. Only once, and only
    /// between steps: a running step, an IMPORT still taking its lines, or a close under way
    /// is let finish first.
    func handsOffNow(stopping: Bool, importing: Bool) -> Bool {
        stopping && !farewelled && !isBusy && !importing && !isClosing
    }

    /// Stopping, a step just answered: whether the session is handed off now.
    func handsOffAfterStep(stopping: Bool) -> Bool { stopping && !farewelled }

    /// It is being handed off or told goodbye; false when it already was.
    mutating func farewell() -> Bool {
        guard !farewelled else { return false }
        farewelled = true
        return true
    }

    /// Idle, shutting down, ended: answer what is buffered, then close. A running step is
    /// answered first: the connection closes after its reply.
    mutating func closeWhenIdle() {
        switch state {
        case .awaitingProxyHeader, .reading, .importing, .skippingData, .switchingToTLS: state = .closing
        case .awaitingDatabase: closesAfterStep = true
        case .closing, .closed: break
        }
    }

    mutating func didClose() { state = .closed }

    // MARK: - Output and interest

    /// While a step runs, the replies before it wait to leave with its own (one write, one
    /// wake-up of the client instead of two), unless they pile up or the step is slow.
    func shouldFlush(pendingOutput: Int) -> Bool {
        pendingOutput > 0 && (!isBusy || !persisting && (pendingOutput >= highWater / 2 || flushHeld))
    }

    /// The session may take lines again after this turn (it stopped for its budget).
    func continuesNextTurn(budgetSpent: Bool) -> Bool {
        budgetSpent && !isBusy && state != .closed
    }

    /// Pushed events go out only between replies.
    var pushesEvents: Bool { !isBusy && state != .closed }

    /// A streamed reply's worker may go on: the client has taken enough.
    func releasesSink(pendingOutput: Int) -> Bool { pendingOutput < highWater }

    /// Everything is answered and sent, and the connection should end.
    func closesNow(pendingOutput: Int, budgetSpent: Bool) -> Bool {
        guard pendingOutput == 0, !isBusy, state != .closed else { return false }
        // With budget left, the lines ran out: all the peer sent is answered.
        return state == .closing || (peerClosed && !budgetSpent)
    }

    /// The epoll interest for now; nil when it is unchanged. While a step runs the session
    /// takes no new line, but its read interest stays armed until the peer sends more than it
    /// has: a request-and-reply client then costs no epoll_ctl per step, and one that
    /// pipelines is bounded by one read. A transport that needs the socket (a TLS handshake)
    /// gets it whatever the session wants.
    mutating func interest(pendingOutput: Int, bufferedBytes: Int, importPaused: Bool,
                           transportWantsRead: Bool = false, transportWantsWrite: Bool = false) -> UInt32? {
        guard state != .closed else { return nil }
        let open = state != .closing && state != .switchingToTLS && !peerClosed && pendingOutput < highWater
        let reading = open && (!isBusy && !importPaused
            || (interest & Readiness.readable != 0 && bufferedBytes == 0))
        var wanted: UInt32 = 0
        if reading || transportWantsRead { wanted |= Readiness.readable }
        // Output waits for writability, unless the transport's write waits for the peer (a TLS
        // handshake the client has not begun): a socket is writable all the time, and asking
        // for it then woke the loop at every turn, spinning a core on idle TLS connections.
        let writeCanProceed = !transportWantsRead
        if (pendingOutput > 0 && shouldFlush(pendingOutput: pendingOutput) && writeCanProceed) || transportWantsWrite { wanted |= Readiness.writable }
        guard wanted != interest else { return nil }
        interest = wanted
        return wanted
    }
}
