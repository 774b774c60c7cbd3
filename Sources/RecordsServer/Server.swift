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
public final class Server: ConnectionHost {
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
    /// What each connection copies of `configuration`.
    let settings: ConnectionSettings
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
        self.settings = ConnectionSettings(configuration)
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
                return connection.completed(bytes: bytes)
            }
            // A reply held back (a failed AUTH): the session stays busy until it goes.
            loop.after(delay) { [self] in
                guard !connection.closed else { return }
                effects.forEach { $0(connection.session) }
                connection.completed(bytes: bytes)
            }
        case .importFinished(let id, let bytes, let held):
            guard let connection = byID[id] else { return }
            connection.poolUse.record(seconds: held)
            importFinished(connection, bytes: bytes)
        case .importRoom(let id):
            guard let connection = byID[id], !connection.busy else { return }
            connection.service()
        case .streamed(let id, let lines, let sink):
            guard let connection = byID[id] else { return sink.release(gone: true) }
            connection.deliver(lines, sink: sink)
        case .changes(let delivery):
            deliver(delivery)
        case .filtered(let ids, let lines, let unchecked):
            for id in ids {
                guard let connection = byID[id] else { continue }
                if !lines.lines.isEmpty { connection.events.append(lines) }
                connection.events.dropped += unchecked
                if !connection.busy { connection.service() }
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
            connection.service()
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
                warnOnce("accept failed: \(error)")
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
                    warnOnce("TLS: \(error)")
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
            let connection = ClientConnection(id: session.id, host: self, settings: settings, transport: transport, session: session, peer: peer,
                                              maxLineLength: session.mustAuthenticate ? min(configuration.preAuthLineLength, configuration.maxLineLength)
                                                                                      : configuration.maxLineLength,
                                              highWater: configuration.outputHighWater, awaitsProxyHeader: proxied, now: now())
            do {
                try loop.add(fd, events: 0) { [unowned self, unowned connection] events in connection.handle(events: events) }
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
            connection.service()
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
        warnOnce("out of file descriptors (\(connections.count) sessions open): not accepting until one frees")
    }

    func resumeAccepting() {
        guard acceptPaused, !stopping else { return }
        acceptPaused = false
        for resumed in listeners { loop.modify(resumed.fd, events: Readiness.readable) }
    }

    /// A warning at most once a second, however often it happens.
    func warnOnce(_ message: String) {
        let current = now()
        guard current - lastWarning >= 1_000_000_000 else { return }
        lastWarning = current
        Log.warning(message)
    }

    // MARK: - Serving a connection: what a connection's handler asks of the server

    var metrics: Metrics { context.metrics }

    func read(_ transport: Transport, into framer: inout LineFramer) -> TransportRead {
        let result = readBuffer.withUnsafeMutableBytes { transport.read(into: $0) }
        if case .bytes(let count) = result { framer.append(readBuffer[0..<count]) }
        return result
    }

    func nextTurn(_ body: @escaping () -> Void) { loop.nextTurn(body) }

    func wait(_ connection: ClientConnection, for events: UInt32) { loop.modify(connection.fd, events: events) }

    func secureTransport(for connection: ClientConnection) -> Transport? {
        guard let tls = configuration.tls else { return nil }
        do {
            return try TLSTransport(fd: connection.fd, context: tls, handshake: handshakeCounter)
        } catch {
            Log.warning("STARTTLS: \(error)", session: connection.id)
            return nil
        }
    }

    /// Answered the same whether or not the session exists, the key fits, or anything ran:
    /// the reply tells a guesser nothing.
    func cancel(session target: Int, key: String, from connection: ClientConnection) {
        guard let other = byID[target], other !== connection, Secret.equal(other.session.cancelKey.utf8, key.utf8) else { return }
        if other.cancelBox.cancel() { Log.info("s\(target)'s running command cancelled from \(connection.peer)", session: connection.id) }
    }

    func farewell(_ connection: ClientConnection) { farewell([connection]) }

    /// Counts each client TLS handshake by how it ended.
    var handshakeCounter: (Bool) -> Void {
        { [metrics = context.metrics] done in metrics.add(done ? .tlsHandshakes : .tlsHandshakeFailures) }
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
            connection.service()
        }
        if configuration.signInTimeout > 0 {
            // A client that must sign in and has not holds a session slot for nothing.
            let limit = UInt64(configuration.signInTimeout) * 1_000_000_000
            for connection in Array(connections.values)
            where !connection.busy && connection.session.mustAuthenticate && connection.session.user == nil
                && current - connection.connectedAt > limit && !connection.machine.isClosing {
                connection.push(Notice.signInTimeout(seconds: configuration.signInTimeout).text)
                connection.machine.closeWhenIdle()
                connection.service()
            }
        }
        guard configuration.idleTimeout > 0 else { return }
        let limit = UInt64(configuration.idleTimeout) * 1_000_000_000
        for connection in Array(connections.values) where !connection.busy && current - connection.lastActivity > limit {
            connection.push(Notice.idle(seconds: configuration.idleTimeout).text)
            connection.machine.closeWhenIdle()
            connection.service()
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
