#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Postgres
import Records
import RecordsProtocol
import TLS

/// What other threads tell the loop: pool workers, the change feed's reader, a signal.
/// Connections are named by id; the loop looks them up (a closed one is simply gone).
enum ServerMessage: Sendable {
    /// A pool job's replies and what its works change in the session.
    case finished(connection: Int, bytes: [UInt8], effects: [@Sendable (Session) -> Void], held: Double, delay: Double)
    /// An IMPORT's COPY ended.
    case importFinished(connection: Int, bytes: [UInt8], held: Double)
    /// A full IMPORT feed has room again.
    case importRoom(connection: Int)
    /// Streamed data lines of a reply still being produced; `sink` waits for room.
    case streamed(connection: Int, lines: [UInt8], sink: StreamSink)
    case changes(Server.Delivery)
    /// Lines of a WATCH ... WHERE event for the sessions whose predicate matched.
    case filtered(connections: [Int], lines: PushLines, unchecked: Int = 0)
    /// Sessions handed off at shutdown were stored (or not: `failure`).
    case handedOff(connections: [Int], notices: [(token: String, pending: Int)], failure: String?)
    /// A session's durable state was written (`version`), or not (`failure`); `ahead`: at the
    /// head of a step's job, whose reply follows.
    case persisted(connection: Int, version: Int, pending: Int, failure: String?, ahead: Bool = false)
    /// An operator ends a session (`SessionBoard.end`).
    case end(session: Int)
    case stop
}

/// The line server: one epoll loop thread serves every socket and owns every session; database
/// steps run on the connection pool's workers and come back to the loop as messages, in order
/// per session. Confined to the thread that runs it: other threads hold only `stopper`.
public final class Server {
    public struct Configuration: Sendable {
        public var host = "127.0.0.1"
        public var port = 7878
        public var maxSessions = 10_000
        public var maxLineLength = 1 << 20
        /// Past this much unsent output a session is not read until it drains (backpressure).
        public var outputHighWater = 64 * 1024
        /// Seconds without a request before a session is closed; 0 never.
        public var idleTimeout = 0
        /// Seconds a session that must sign in may go without doing so; 0 never.
        public var signInTimeout = 30
        /// A reply held in memory (all but streamed FIND records) may not exceed this.
        public var maxReplyBytes = 64 << 20
        /// Seconds an IMPORT's COPY waits for more data before it is aborted (it holds a
        /// pooled connection meanwhile).
        public var importStallSeconds = 30
        /// Seconds in-flight commands get to finish at shutdown.
        public var shutdownGrace = 10
        /// Seconds a session handed off at shutdown waits for its RESUME.
        public var resumeTTL = HandOff.defaultTTL
        /// --durable-units: each session's state is written to PostgreSQL whenever it changes,
        /// before the replies that changed it go out, so a crash loses nothing acknowledged.
        public var durableUnits = false
        /// Bytes of one line from a session that has not signed in.
        public var preAuthLineLength = 4096
        /// Seconds a streamed reply waits for a client that reads nothing.
        public var replyStallSeconds = 30
        /// Shown in the banner of sessions that need no AUTH.
        public var authenticationNote = "no authentication"
        /// The certificate and key for STARTTLS and the TLS listener; nil: no TLS.
        public var tls: TLSContext?
        /// Where connections that speak TLS from their first byte are accepted.
        public var tlsListen: (host: String, port: Int)?
        /// --proxy-from: balancers whose connections to the plain listener begin with a PROXY
        /// protocol v1 header naming the client (addresses as the socket reports them).
        public var proxyFrom: Set<String> = []
        public init() {}
    }

    public private(set) var boundPort = 0
    public private(set) var boundTLSPort = 0
    let configuration: Configuration
    let context: ServerContext
    let pool: ConnectionPool
    /// SAVEs waiting to run in groups (`queueSave`), by their clients' standing; an unproven
    /// client's SAVE runs alone.
    let saveQueues: [PoolStanding: SaveQueue] = [.proven: SaveQueue(), .new: SaveQueue()]
    let loop: EventLoop<ServerMessage>
    var inbox: LoopInbox<ServerMessage> { loop.inbox }
    var listener: Listener?
    /// Connections here speak TLS from their first byte (`--tls-listen`).
    var tlsListener: Listener?
    var listeners: [Listener] { [listener, tlsListener].compactMap { $0 } }
    var connections: [Int32: ClientConnection] = [:]
    var byID: [Int: ClientConnection] = [:]
    /// WATCH on entities with row-level security: one ledger per identity and entity.
    var ledgers: [LedgerKey: VisibilityLedger] = [:]
    /// The sessions that joined each ledger (some may have left since).
    var ledgerUsers: [LedgerKey: Set<Int>] = [:]
    var nextSessionID = 1
    var readBuffer = [UInt8](repeating: 0, count: 64 * 1024)
    var stopping = false
    var stopDeadline: UInt64 = 0
    /// Past the grace, hand-offs still being written get this much longer.
    var handOffDeadline: UInt64 = 0
    static let handOffExtraSeconds = 15
    /// The running statements were cancelled at the shutdown deadline; their replies are awaited.
    var cancelledAtShutdown = false
    /// A descriptor kept open to be given up when there is no other, to refuse a connection.
    var reserveFD: Int32 = open("/dev/null", O_RDONLY | O_CLOEXEC)
    var acceptPaused = false
    var lastWarning: UInt64 = 0
    var finished = false
    let sessionCount = SessionCount()
    /// Each session's line for operators; other threads read it and ask to end a session.
    public let board = SessionBoard()
    /// Connections closed gracefully whose client may still be sending, by descriptor, with
    /// when to give up on them: the write side is shut (FIN after the last reply) and what
    /// arrives is dropped until the client closes. Closing a socket with unread input resets
    /// the connection, and a reset discards replies the client has not read yet (a hand-off
    /// notice among them).
    /// A lingering connection also ends once the client has acknowledged all it was sent and
    /// has sent nothing for `lingerQuiet`: a client that read its notice and keeps its end open
    /// (waiting for a server that is stopping) does not hold the shutdown to its deadline.
    var lingering: [Int32: Lingering] = [:]
    struct Lingering {
        var until: UInt64
        var lastInput: UInt64
    }
    static let lingerSeconds: UInt64 = 5
    static let lingerQuiet: UInt64 = 300_000_000
    /// Past this many, a connection closes at once (each holds a descriptor for up to 5 s).
    static let maxLingering = 1024

    /// Bytes the client sent that were not read yet.
    static func hasUnreadInput(_ fd: Int32) -> Bool {
        var count: Int32 = 0
        return ioctl(fd, UInt(FIONREAD), &count) == 0 && count > 0
    }

    /// Whether the peer has acknowledged every byte written (TIOCOUTQ on a TCP socket counts
    /// what is unsent or unacknowledged).
    static func allAcknowledged(_ fd: Int32) -> Bool {
        var count: Int32 = 0
        return ioctl(fd, UInt(TIOCOUTQ), &count) == 0 && count == 0
    }

    public init(configuration: Configuration, context: ServerContext, pool: ConnectionPool) throws {
        self.configuration = configuration
        self.context = context
        self.pool = pool
        self.loop = try EventLoop()
        context.onChanges { [inbox = loop.inbox, context] events in
            inbox.post(.changes(Self.render(events, model: context.model)))  // rendered on the watcher's thread
        }
        context.setStatusProvider { [sessionCount] in (sessionCount.value, pool.statistics) }
        board.setEnder { [inbox = loop.inbox] id in inbox.post(.end(session: id)) }
    }

    /// Stops the server from any thread (a signal handler): see `stop()`.
    public var stopper: @Sendable () -> Void {
        { [inbox = loop.inbox] in inbox.post(.stop) }
    }

    /// Binds the listening socket; after this, clients can connect.
    /// A port listened on before the server exists: taken first thing at start, so a port in
    /// use stops the server before migrations change anything; clients that connect meanwhile
    /// wait in its backlog. `bind` serves it.
    public struct Reservation {
        let listener: Listener
        public init(host: String, port: Int) throws { listener = try Listener(host: host, port: port) }
    }

    public func bind(reserved: Reservation? = nil, reservedTLS: Reservation? = nil) throws {
        let listener = try reserved?.listener ?? Listener(host: configuration.host, port: configuration.port)
        self.listener = listener
        boundPort = listener.port
        try loop.add(listener.fd, events: Readiness.readable) { [unowned self] _ in self.acceptAll(from: listener, secure: false) }
        if let address = configuration.tlsListen, configuration.tls != nil {
            let tls = try reservedTLS?.listener ?? Listener(host: address.host, port: address.port)
            tlsListener = tls
            boundTLSPort = tls.port
            try loop.add(tls.fd, events: Readiness.readable) { [unowned self] _ in self.acceptAll(from: tls, secure: true) }
        }
    }

    /// Serves until `stop()`; returns once every session is closed.
    public func run() {
        loop.run(tick: { tick() }, receive: { receive($0) }, shouldStop: { finished })
    }

    /// Begins a graceful shutdown: stop accepting, tell each session, let in-flight commands
    /// finish (bounded by `shutdownGrace`), then close. From the loop's thread; others use
    /// `stopper`.
    public func stop() {
        beginShutdown()
    }

    /// On the loop: a message from another thread.
    func receive(_ message: ServerMessage) {
        switch message {
        case .finished(let id, let bytes, let effects, let held, let delay):
            guard let connection = byID[id] else { return }
            connection.poolUse.record(seconds: held)
            guard delay > 0 else {
                effects.forEach { $0(connection.session) }
                return completed(connection, bytes: bytes)
            }
            // A reply held back (a failed AUTH): the session stays busy until it goes.
            loop.after(delay) { [self] in
                guard !connection.closed else { return }
                effects.forEach { $0(connection.session) }
                completed(connection, bytes: bytes)
            }
        case .importFinished(let id, let bytes, let held):
            guard let connection = byID[id] else { return }
            connection.poolUse.record(seconds: held)
            importFinished(connection, bytes: bytes)
        case .importRoom(let id):
            guard let connection = byID[id], !connection.busy else { return }
            service(connection)
        case .streamed(let id, let lines, let sink):
            guard let connection = byID[id] else { return sink.release(gone: true) }
            deliver(lines, to: connection, sink: sink)
        case .changes(let delivery):
            deliver(delivery)
        case .filtered(let ids, let lines, let unchecked):
            for id in ids {
                guard let connection = byID[id] else { continue }
                if !lines.lines.isEmpty { connection.events.append(lines) }
                connection.events.dropped += unchecked
                if !connection.busy { service(connection) }
            }
        case .handedOff(let ids, let notices, let failure):
            handedOff(ids, notices: notices, failure: failure)
        case .persisted(let id, let version, let pending, let failure, let ahead):
            guard let connection = byID[id] else { return }
            if ahead { return persistedAhead(connection, version: version, pending: pending, failure: failure) }
            persisted(connection, version: version, pending: pending, failure: failure)
        case .end(let id):
            guard let connection = byID[id], !connection.machine.isClosing else { return }
            // As QUIT: its pending changes are dropped, nothing is kept to resume. A running
            // command is answered first (a SAVE is all or nothing either way).
            Log.info("ended by an operator", session: id)
            connection.push(Notice.ended.text)
            connection.machine.quitWhenIdle()
            service(connection)
        case .stop:
            beginShutdown()
        }
    }

    /// Publishes the connection's line on the operators' board when it changed since it was
    /// last published, not at every turn of a command that waits on PostgreSQL.
    func publish(_ connection: ClientConnection) {
        let session = connection.session
        let running = connection.busy
        if connection.boardEntry.running && !running { connection.boardEntry.commandStarted = now() }  // idle since
        connection.boardEntry.running = running
        connection.boardEntry.user = session.user?.name
        connection.boardEntry.address = session.peer
        connection.boardEntry.tls = session.secure
        connection.boardEntry.pending = session.unit.heldCount
        connection.boardEntry.watching = session.watches.count
        guard connection.boardEntry != connection.boardPublished else { return }
        connection.boardPublished = connection.boardEntry
        board.publish(connection.boardEntry)
    }

    // MARK: - Accepting

    func acceptAll(from listener: Listener, secure: Bool) {
        guard !stopping, !acceptPaused else { return }
        while true {
            let fd: Int32?
            do { fd = try listener.accept() } catch {
                if error.errno == EMFILE || error.errno == ENFILE {
                    return outOfDescriptors(listener)
                }
                logOnce("accept failed: \(error)")
                return
            }
            guard let fd else { return }
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            if connections.count >= configuration.maxSessions {
                context.metrics.add(.sessionsRefused)
                var refusal: [UInt8] = []
                Reply.error(.limit, "too many sessions (\(configuration.maxSessions)); try again later").encode(into: &refusal)
                _ = refusal.withUnsafeBytes { send(fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
                close(fd)
                Log.warning("refused a connection: \(configuration.maxSessions) sessions open")
                continue
            }
            let peer = peerName(fd)
            let transport: Transport
            if secure, let tls = configuration.tls {
                do {
                    transport = try TLSTransport(fd: fd, context: tls, handshake: handshakeCounter)
                } catch {
                    logOnce("TLS: \(error)")
                    close(fd)
                    continue
                }
            } else {
                transport = PlainTransport(fd: fd)
            }
            let session = Session(id: nextSessionID, context: context, peer: peer)
            session.secure = secure
            nextSessionID += 1
            // A trusted balancer's first line names the client (TLS from the first byte has no
            // room for it: behind a balancer, STARTTLS on the plain listener).
            let proxied = !secure && !configuration.proxyFrom.isEmpty
                && ProxyHeader.balancerAddress(peer).map(configuration.proxyFrom.contains) == true
            // Before sign-in a line is short: an unknown client holds little.
            let connection = ClientConnection(id: session.id, transport: transport, session: session, peer: peer,
                                              maxLineLength: session.mustAuthenticate ? min(configuration.preAuthLineLength, configuration.maxLineLength)
                                                                                      : configuration.maxLineLength,
                                              highWater: configuration.outputHighWater, awaitsProxyHeader: proxied, now: now())
            do {
                try loop.add(fd, events: 0) { [unowned self, unowned connection] events in self.handle(connection, events: events) }
            } catch {
                close(fd)
                continue
            }
            connections[fd] = connection
            byID[connection.id] = connection
            sessionCount.value = connections.count
            connection.boardPublished = connection.boardEntry
            board.publish(connection.boardEntry)
            Log.debug("connected from \(connection.peer)", session: session.id)
            let note = session.mustAuthenticate ? "authentication required: AUTH name password" : configuration.authenticationNote
            connection.append(.ok("recordsd \(ServerContext.version) ready (\(note)); type HELP for commands"))
            service(connection)
        }
    }

    /// No descriptor left for a new connection: the reserve one is given up to take it and
    /// tell it why, then the listener pauses (no busy loop on a connection it cannot take)
    /// until a session closes or the next tick.
    func outOfDescriptors(_ listener: Listener) {
        if reserveFD >= 0 {
            close(reserveFD)
            reserveFD = -1
            if let fd = try? listener.accept() {
                var refusal: [UInt8] = []
                Reply.error(.limit, "the server has no file descriptor left; try again later").encode(into: &refusal)
                _ = refusal.withUnsafeBytes { send(fd, $0.baseAddress!, $0.count, Int32(MSG_NOSIGNAL)) }
                close(fd)
            }
            reserveFD = open("/dev/null", O_RDONLY | O_CLOEXEC)
        }
        acceptPaused = true
        for paused in listeners { loop.modify(paused.fd, events: 0) }
        logOnce("out of file descriptors (\(connections.count) sessions open): not accepting until one frees")
    }

    func resumeAccepting() {
        guard acceptPaused, !stopping else { return }
        acceptPaused = false
        for resumed in listeners { loop.modify(resumed.fd, events: Readiness.readable) }
    }

    /// A warning at most once a second, however often it happens.
    func logOnce(_ message: String) {
        let current = now()
        guard current - lastWarning >= 1_000_000_000 else { return }
        lastWarning = current
        Log.warning(message)
    }

    // MARK: - Serving a connection

    func handle(_ connection: ClientConnection, events: UInt32) {
        // A TLS read that must first send (a handshake) goes on when the socket is writable.
        if events & (Readiness.readable | Readiness.hangup) != 0
            || (events & Readiness.writable != 0 && connection.transport.wantsWrite) {
            readAvailable(connection)
        }
        guard !connection.closed else { return }
        service(connection)
    }

    /// Counts each client TLS handshake by how it ended.
    var handshakeCounter: (Bool) -> Void {
        { [metrics = context.metrics] done in metrics.add(done ? .tlsHandshakes : .tlsHandshakeFailures) }
    }

    func readAvailable(_ connection: ClientConnection) {
        // Level-triggered: one read per wake-up keeps sessions fair; the rest comes next turn.
        let result = readBuffer.withUnsafeMutableBytes { connection.transport.read(into: $0) }
        switch result {
        case .bytes(let count):
            connection.framer.append(readBuffer[0..<count])
            connection.boardEntry.bytesIn += count
            context.metrics.add(.bytesIn, count)
        case .wouldBlock: break
        case .closed: connection.machine.peerDidClose()
        }
        if connection.transport.hasBufferedInput {
            // TLS holds the rest of a record: the socket will not say so.
            loop.nextTurn { [self] in
                guard !connection.closed else { return }
                readAvailable(connection)
                service(connection)
            }
        }
    }

    /// Takes whole lines while the session is free and its output below the high-water mark,
    /// writes what the socket takes (and again while that frees room and lines remain),
    /// and sets what to wait for next.
    func service(_ connection: ClientConnection) {
        var budget = TurnBudget(start: now())
        while true {
            var progressed = false, ranCommand = false
            while !budget.spent, !stopping || connection.importing != nil,
                  connection.machine.takesLine(pendingOutput: connection.pendingOutput, importPaused: connection.importPaused),
                  let event = connection.nextEvent() {
                progressed = true
                defer { budget.spend(now: now()) }
                switch connection.machine.route(event) {
                case .proxyHeader(let event):
                    takeProxyHeader(event, on: connection)
                case .run(let line):
                    ranCommand = true
                    run(line, on: connection)
                case .gather(let event):
                    gather(event, for: connection)
                case .drop:
                    break
                case .tooLong(let length):
                    context.metrics.add(.linesTooLong)
                    let limit = connection.framer.maxLineLength
                    let why = limit < configuration.maxLineLength ? " before sign-in" : ""
                    connection.append(.error(.limit, "line too long (\(length)+ bytes; the limit is \(limit)\(why))"))
                case .invalid(let reason):
                    connection.append(.error(.syntax, reason))
                }
            }
            if progressed { connection.lastActivity = now() }  // once per turn, not per line
            if ranCommand {
                // The board shows the turn's last command, from when the turn ran it.
                connection.boardEntry.verb = connection.session.currentVerb
                connection.boardEntry.commandStarted = connection.lastActivity
                connection.boardEntry.running = true
            }
            if configuration.durableUnits { persistIfChanged(connection) }
            let held = connection.pendingOutput
            if connection.machine.shouldFlush(pendingOutput: held) {
                let flushed = connection.flush()
                context.metrics.add(.bytesOut, held - connection.pendingOutput)
                connection.boardEntry.bytesOut += held - connection.pendingOutput
                if connection.pendingOutput < held { connection.streamSink?.taken(at: now()) }
                if flushed == .failed { return closeConnection(connection) }
            }
            // Room made by the flush lets buffered lines run even if none could this round.
            let drained = connection.pendingOutput < held
            guard progressed || drained, !budget.spent,
                  connection.machine.takesLine(pendingOutput: connection.pendingOutput, importPaused: false) else { break }
        }
        let spent = budget.spent
        if connection.machine.continuesNextTurn(budgetSpent: spent) {
            loop.nextTurn { [self] in if !connection.closed { service(connection) } }  // more lines wait
        }
        if connection.machine.pushesEvents && (!connection.events.isEmpty || connection.events.dropped > 0) { pushEvents(connection) }
        if let sink = connection.waitingSink, connection.machine.releasesSink(pendingOutput: connection.pendingOutput) {
            connection.waitingSink = nil
            sink.release(gone: false)
        }
        if connection.machine.closesNow(pendingOutput: connection.pendingOutput, budgetSpent: spent) {
            return closeConnection(connection, graceful: true)
        }
        publish(connection)
        // Stopping, and this session's last step (an IMPORT's too) is answered: hand it off.
        if connection.machine.handsOffNow(stopping: stopping, importing: connection.importing != nil) {
            return farewell([connection])
        }
        if connection.machine.switchesTransport(pendingOutput: connection.pendingOutput), let tls = configuration.tls {
            do {
                connection.transport = try TLSTransport(fd: connection.fd, context: tls, handshake: handshakeCounter)
            } catch {
                Log.warning("STARTTLS: \(error)", session: connection.id)
                return closeConnection(connection)
            }
            // Nothing the client sent before its handshake counts (it could have been injected).
            connection.framer.discardBuffered()
            connection.pushedBack = nil
            connection.session.secure = true
            connection.machine.switchedTransport()
        }
        if let interest = connection.machine.interest(pendingOutput: connection.pendingOutput,
                                                      bufferedBytes: connection.framer.bufferedByteCount,
                                                      importPaused: connection.importPaused,
                                                      transportWantsRead: connection.transport.wantsRead,
                                                      transportWantsWrite: connection.transport.wantsWrite) {
            loop.modify(connection.fd, events: interest)
        }
    }

    func run(_ line: String, on connection: ClientConnection) {
        let verb = Verb.of(line)  // once a line: the loop's choice, then the session's
        if Self.isRead(verb) { return runReads(line, on: connection) }
        let limit = configuration.maxReplyBytes
        switch connection.session.handle(line, verb: verb) {
        case .reply(let reply):
            connection.append(reply, limit: limit)
            connection.machine.stepped(.reply)
        case .close(let reply):
            connection.append(reply, limit: limit)
            connection.machine.stepped(.quit)  // its pending changes are dropped, nothing to resume
        case .skipData(let reply):
            connection.append(reply, limit: limit)
            connection.machine.stepped(.skipData)
        case .startTLS(let reply):
            connection.append(reply, limit: limit)
            connection.machine.stepped(.startTLS)
        case .collect(let job):
            let feed = ImportFeed(stallSeconds: configuration.importStallSeconds) { [inbox, id = connection.id] in
                inbox.post(.importRoom(connection: id))
            }
            connection.importing = ImportState(job: job, feed: feed)
            connection.framer.keepsCarriageReturns = true
            connection.machine.stepped(.collect)
        case .database(let work):
            onPool(connection, [.work(work)])
        case .cancel(let target, let key):
            // Answered the same whether or not the session exists, the key fits, or anything
            // ran: the reply tells a guesser nothing.
            if let other = byID[target], other !== connection, Secret.equal(other.session.cancelKey.utf8, key.utf8) {
                if other.cancelBox.cancel() { Log.info("s\(target)'s running command cancelled from \(connection.peer)", session: connection.id) }
            }
            connection.append(.ok("cancel request sent"), limit: limit)
            connection.machine.stepped(.reply)
        }
    }

    /// The first line from a trusted balancer: the client it carries becomes the session's
    /// peer. Anything else, a line too long or not text included, ends the connection (a
    /// balancer that sends no header is misconfigured, and its clients would all share its
    /// address).
    func takeProxyHeader(_ event: LineFramer.Event, on connection: ClientConnection) {
        let parsed: Result<ProxyHeader.Parsed, ProxyHeader.Invalid>
        switch event {
        case .line(let line): parsed = ProxyHeader.parse(line)
        case .tooLong: parsed = .failure(ProxyHeader.Invalid(reason: "longer than \(ProxyHeader.maxLength) bytes"))
        case .invalid: parsed = .failure(ProxyHeader.Invalid(reason: "not a PROXY protocol v1 header"))
        }
        switch parsed {
        case .success(.client(let address)):
            connection.session.proxied(for: address)
            Log.debug("proxied for \(address) by \(connection.peer)", session: connection.id)
        case .success(.unknown):
            break
        case .failure(let invalid):
            logOnce("a connection from \(connection.peer) (--proxy-from) began without a PROXY header: \(invalid.reason)")
            connection.append(bytes: encoded(.error(.syntax, "expected a PROXY protocol v1 header from this balancer (--proxy-from): \(invalid.reason)")))
            connection.machine.stepped(.close)
        }
    }

    /// Runs `works` in order as one job on a pool worker. The session stays on the loop and
    /// reads nothing meanwhile, so replies stay in order; each work's effects on the session
    /// come back with the reply bytes and are applied there, in order.
    func onPool(_ connection: ClientConnection, _ works: [BatchItem]) {
        if queueSave(connection, works) { return }
        connection.machine.startedDatabase()
        let sink = StreamSink(inbox: inbox, connection: connection.id, stallSeconds: configuration.replyStallSeconds, metrics: context.metrics)
        connection.streamSink = sink
        let id = connection.id
        let maxReplyBytes = configuration.maxReplyBytes
        let highWater = configuration.outputHighWater
        let settings = context.work
        let holds = works.compactMap { if case .work(let work) = $0 { work.hold } else { nil } }
        // --durable-units: edits answered before this step are written first, in the same job,
        // so no reply goes out (a slow step lets earlier ones go) before what it acknowledged.
        let durable = durableEntry(connection)
        if durable != nil { connection.machine.writesAhead() }
        let ttl = configuration.resumeTTL, server = context.serverID
        // A sign-in is short and bounded: a new client gets it even while slow ones hold the rest.
        let standing = holds.contains(.signIn) ? .proven : connection.poolUse.standing()
        let cancelBox = connection.cancelBox
        let generation = cancelBox.submitted()
        pool.submit(standing, streams: holds.contains(.streams)) { [inbox, pool] database in
            defer { cancelBox.finished(generation) }
            let started = DispatchTime.now().uptimeNanoseconds
            let batch = BatchSink(sink: sink, limit: highWater)
            var effects: [@Sendable (Session) -> Void] = []
            var delay = 0.0
            if let (entry, version) = durable {
                let failure = Self.store([entry], ttl: ttl, server: server, open: true, database)
                inbox.post(.persisted(connection: id, version: version, pending: entry.pending, failure: failure, ahead: true))
            }
            let context = (try? database.get()).map { WorkContext(lease: $0, sink: batch, settings: settings, lend: pool.submitIfIdle) }
            // A CANCEL that came while the job waited: its works are answered without running.
            let proceed = cancelBox.begin(context?.lease.connection.canceller())
            // Past a client that stopped reading, works are answered without being run.
            var open = true
            func answer(_ result: WorkResult?) {
                guard open, let result else {
                    return Reply.error(.limit, "not run: the client read nothing for \(settings.replyStall) s").encode(into: &batch.pending)
                }
                batch.pending += Self.encoded(cancelBox.answer(result.reply), limit: maxReplyBytes)
                if let apply = result.apply { effects.append(apply) }
                delay = max(delay, result.delay)
                if !batch.flushIfLarge() { open = false }  // one large reply at a time
            }
            var index = works.startIndex
            while index < works.endIndex {
                if !proceed, case .work = works[index] {
                    Reply.cancelled.encode(into: &batch.pending)
                    index += 1
                    continue
                }
                // Reads that can share a round trip go to PostgreSQL as one pipeline.
                let reads = Self.pipelinableRun(works[index...])
                if reads.count > 1, open, let context {
                    DatabaseWork.runPipelined(reads, context) { answer($0) }
                    index += reads.count
                    continue
                }
                switch works[index] {
                case .reply(let bytes):
                    batch.pending += bytes
                    if open && !batch.flushIfLarge() { open = false }
                case .work(let work):
                    if open, context == nil, case .failure(let error) = database {
                        Self.unavailable(error).encode(into: &batch.pending)
                        if !batch.flushIfLarge() { open = false }
                    } else {
                        answer(open ? context.map(work.run) : nil)
                    }
                }
                index += 1
            }
            let bytes = batch.pending
            let held = Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9
            inbox.post(.finished(connection: id, bytes: bytes, effects: effects, held: held, delay: delay))
        }
    }

    /// On the loop: streamed data lines; the sink waits until the output drains.
    func deliver(_ lines: [UInt8], to connection: ClientConnection, sink: StreamSink) {
        guard !connection.closed else { return sink.release(gone: true) }
        connection.append(bytes: lines)
        connection.waitingSink = sink
        service(connection)
    }

    /// The reply's bytes, or a LIMIT error in its place when it is too large to hold.
    func encoded(_ reply: Reply) -> [UInt8] { Self.encoded(reply, limit: configuration.maxReplyBytes) }

    static func encoded(_ reply: Reply, limit: Int) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(reply.lines.isEmpty ? 96 : 1024)
        encode(reply, into: &bytes, limit: limit)
        return bytes
    }

    /// `reply`'s wire form appended to `out`; past `limit` bytes, a LIMIT error in its place.
    static func encode(_ reply: Reply, into out: inout [UInt8], limit: Int) {
        let start = out.count
        reply.encode(into: &out)
        let size = out.count - start
        guard size > limit else { return }
        out.removeSubrange(start...)
        Reply.error(.limit, "reply too large (\(reply.lines.count) lines, \(size) bytes; the limit is \(limit)): narrow it, or use FIND, which streams")
            .encode(into: &out)
    }

    static func unavailable(_ error: PostgresError) -> Reply {
        .error(.unavailable, "PostgreSQL is unavailable (\(error.message)); pending changes are kept: try again when it is back")
    }

    func completed(_ connection: ClientConnection, bytes: [UInt8]) {
        guard !connection.closed else { return }
        connection.streamSink = nil
        connection.machine.databaseFinished(stopping: stopping)
        if let resumed = connection.session.takeResumedDurably() {
            // Written with the RESUME under a new token: the client learns it before the reply.
            if let previous = connection.durableToken, previous != resumed.token { durableSessionEnded(previous, quit: true) }
            connection.durableToken = resumed.token
            connection.durableOwner = connection.session.handOffOwner
            connection.announced = true
            connection.writtenVersion = connection.session.stateVersion
            connection.push(Self.handOffNotice(resumed.token, pending: resumed.pending, ttl: configuration.resumeTTL))
        }
        connection.append(bytes: bytes)
        if connection.session.movedAway {
            // Resumed elsewhere: its state is the other copy's, this connection ends.
            connection.durableToken = nil
            connection.machine.closeWhenIdle()
            return service(connection)
        }
        // Signed in: the full line length from now on.
        if connection.framer.maxLineLength < configuration.maxLineLength, connection.session.user != nil {
            connection.framer.maxLineLength = configuration.maxLineLength
        }
        if connection.machine.handsOffAfterStep(stopping: stopping) { return farewell([connection]) }
        if !connection.session.watches.isEmpty { startLedgers(for: connection) }
        service(connection)
    }

    /// `graceful`: everything it was told is written; the client may still be sending (see
    /// `lingering`).
    func closeConnection(_ connection: ClientConnection, graceful: Bool = false) {
        guard !connection.closed else { return }
        board.remove(connection.id)  // before its client can see the close
        if let token = connection.durableToken { durableSessionEnded(token, quit: connection.machine.quit) }
        connection.machine.didClose()
        connection.session.close()
        connection.waitingSink?.release(gone: true)
        connection.waitingSink = nil
        connection.importing?.feed.fail(.error(.validation, "the client went away"))
        loop.remove(connection.fd)
        if graceful && lingering.count < Self.maxLingering && (stopping || connection.framer.bufferedByteCount > 0 || Self.hasUnreadInput(connection.fd)) {
            linger(connection.fd, transport: connection.transport)
        } else {
            connection.transport.close()
        }
        connections[connection.fd] = nil
        byID[connection.id] = nil
        sessionCount.value = connections.count
        resumeAccepting()
        Log.debug("closed", session: connection.session.id)
        finishIfDrained()
    }

    /// Stopping, with no session left and no lingering close under way: the loop ends.
    func finishIfDrained() {
        if stopping && connections.isEmpty && lingering.isEmpty { finished = true }
    }

    /// Shuts the write side and drops what the client still sends until it closes (or the
    /// time runs out: `lingerSeconds`, or the hand-off deadline when stopping).
    func linger(_ fd: Int32, transport: Transport) {
        transport.finishWriting()
        do {
            try loop.add(fd, events: Readiness.readable) { [unowned self] _ in self.drainLingering(fd) }
        } catch {
            _ = Glibc.close(fd)
            return
        }
        let current = now()
        lingering[fd] = Lingering(until: stopping ? handOffDeadline : current + Self.lingerSeconds * 1_000_000_000, lastInput: current)
    }

    func drainLingering(_ fd: Int32) {
        for _ in 0..<16 {
            let count = readBuffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress!, $0.count, Int32(MSG_DONTWAIT)) }
            if count > 0 {
                lingering[fd]?.lastInput = now()
                continue
            }
            if count < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) { return }
            return endLingering(fd)  // the client closed (or the connection failed)
        }
    }

    func endLingering(_ fd: Int32) {
        guard lingering.removeValue(forKey: fd) != nil else { return }
        loop.remove(fd)
        _ = Glibc.close(fd)
        finishIfDrained()
    }

    // MARK: - Time, limits, shutdown

    func tick() {
        let current = now()
        for (fd, linger) in lingering
        where current >= linger.until || current - linger.lastInput >= Self.lingerQuiet && Self.allAcknowledged(fd) && !Self.hasUnreadInput(fd) {
            endLingering(fd)
        }
        if stopping {
            let working = connections.values.filter { $0.busy && !$0.handingOff }
            if current >= stopDeadline && !cancelledAtShutdown && !working.isEmpty {
                // Commands still running at the deadline are cancelled and answered before
                // their connections close: a SAVE's client learns whether it committed, a
                // stream ends with its status line. Then each session is handed off.
                cancelledAtShutdown = true
                stopDeadline = current + 5_000_000_000
                for connection in working { connection.streamSink?.stop() }
                pool.cancelRunning()
                Log.info("shutting down: cancelled the commands still running")
                return
            }
            // Hand-offs are waited for longer than steps (a large unit takes seconds to write),
            // and so are clients still to read their tokens (a slow reader of a stream); not a
            // client owed only goodbye, which may read nothing at all.
            let handing = connections.values.contains { $0.handingOff || $0.owesNotice && $0.pendingOutput > 0 } && current < handOffDeadline
            if connections.isEmpty && (lingering.isEmpty || current >= handOffDeadline) || current >= stopDeadline && !handing {
                let left = connections.values.filter { $0.busy || $0.importing != nil }.count
                if left > 0 { Log.warning("shutting down: \(left) session(s) still busy at the deadline were closed without a hand-off") }
                let unread = connections.values.filter { $0.owesNotice && $0.pendingOutput > 0 }.count
                if unread > 0 { Log.warning("shutting down: \(unread) client(s) read nothing up to the deadline: their hand-off notices were not delivered") }
                for connection in Array(connections.values) { closeConnection(connection) }
                if current < handOffDeadline && !lingering.isEmpty { return }  // their FINs and replies go out first
                for fd in Array(lingering.keys) { endLingering(fd) }
                finished = true
            }
            return
        }
        resumeAccepting()
        // Replies held behind a step that has run for a tick go out now.
        for connection in connections.values where connection.busy && connection.pendingOutput > 0 {
            connection.machine.stepIsSlow()
            service(connection)
        }
        if configuration.signInTimeout > 0 {
            // A client that must sign in and has not holds a session slot for nothing.
            let limit = UInt64(configuration.signInTimeout) * 1_000_000_000
            for connection in Array(connections.values)
            where !connection.busy && connection.session.mustAuthenticate && connection.session.user == nil
                && current - connection.connectedAt > limit && !connection.machine.isClosing {
                connection.push(Notice.signInTimeout(seconds: configuration.signInTimeout).text)
                connection.machine.closeWhenIdle()
                service(connection)
            }
        }
        guard configuration.idleTimeout > 0 else { return }
        let limit = UInt64(configuration.idleTimeout) * 1_000_000_000
        for connection in Array(connections.values) where !connection.busy && current - connection.lastActivity > limit {
            connection.push(Notice.idle(seconds: configuration.idleTimeout).text)
            connection.machine.closeWhenIdle()
            service(connection)
        }
    }

    func beginShutdown() {
        guard !stopping else { return }
        stopping = true
        stopDeadline = now() + UInt64(configuration.shutdownGrace) * 1_000_000_000
        handOffDeadline = stopDeadline + UInt64(Self.handOffExtraSeconds) * 1_000_000_000
        for closing in listeners {
            loop.remove(closing.fd)
            closing.close()
        }
        listener = nil
        tlsListener = nil
        Log.info("shutting down: \(connections.count) session(s) open")
        // An IMPORT under way finishes first (its client sends the rest), as a running step does.
        farewell(connections.values.filter { !$0.busy && $0.importing == nil })
        finishIfDrained()
    }

    func now() -> UInt64 { DispatchTime.now().uptimeNanoseconds }

    /// The host part of the peer's address (the throttle's key).
    func peerName(_ fd: Int32) -> String {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let ok = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(fd, $0, &length) }
        }
        guard ok == 0 else { return "?" }
        var host = [CChar](repeating: 0, count: Int(NI_MAXHOST))
        var service = [CChar](repeating: 0, count: Int(NI_MAXSERV))
        let result = withUnsafePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                getnameinfo($0, length, &host, socklen_t(host.count), &service, socklen_t(service.count), NI_NUMERICHOST | NI_NUMERICSERV)
            }
        }
        guard result == 0 else { return "?" }
        return String(decoding: host.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }
}

/// The number of open sessions, read by INFO on a pool worker.
final class SessionCount: @unchecked Sendable {  // `count` guarded by `lock`
    private let lock = NSLock()
    private var count = 0

    var value: Int {
        get { lock.lock(); defer { lock.unlock() }; return count }
        set { lock.lock(); count = newValue; lock.unlock() }
    }
}
