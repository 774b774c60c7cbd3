import Records
import RecordsProtocol

/// The handler of one connection: it answers each event — its socket is ready
/// (`handle(events:)`), a step's replies came back (`completed(bytes:)`), streamed lines
/// arrived (`deliver(_:sink:)`) — by asking its `ConnectionStateMachine` what to do and doing
/// it, in the stages of a turn (`service`). What all connections share is asked of `host`.
extension ClientConnection {
    /// The socket is ready (`events`).
    func handle(events: UInt32) {
        // A TLS read that must first send (a handshake) goes on when the socket is writable.
        if events & (Readiness.readable | Readiness.hangup) != 0
            || (events & Readiness.writable != 0 && transport.wantsWrite) {
            readAvailable()
        }
        guard !closed else { return }
        service()
    }

    func readAvailable() {
        // Level-triggered: one read per wake-up keeps sessions fair; the rest comes next turn.
        switch host.read(transport, into: &framer) {
        case .bytes(let count):
            boardEntry.bytesIn += count
            host.metrics.add(.bytesIn, count)
        case .wouldBlock: break
        case .closed: machine.peerDidClose()
        }
        if transport.hasBufferedInput {
            // TLS holds the rest of a record: the socket will not say so.
            host.nextTurn { [self] in
                guard !closed else { return }
                readAvailable()
                service()
            }
        }
    }

    /// One turn: takes whole lines while the session is free and its output below the
    /// high-water mark, writes what the socket takes (and again while that frees room and
    /// lines remain), then the stages between steps: pushed events, a waiting stream, the
    /// close, the hand-off, the TLS swap, and what to wait for next.
    func service() {
        var budget = TurnBudget(start: host.now())
        while true {
            let (progressed, ranCommand) = takeLines(&budget)
            if progressed { lastActivity = host.now() }  // once per turn, not per line
            if ranCommand { boardShowsCommand() }
            if settings.durableUnits { host.persistIfChanged(self) }
            let held = pendingOutput
            if machine.shouldFlush(pendingOutput: held), !flushOutput(held: held) { return host.closeConnection(self, graceful: false) }
            // Room made by the flush lets buffered lines run even if none could this round.
            let drained = pendingOutput < held
            guard progressed || drained, !budget.spent,
                  machine.takesLine(pendingOutput: pendingOutput, importPaused: false) else { break }
        }
        betweenSteps(budgetSpent: budget.spent)
    }

    /// The lines the machine takes this round, each routed and run; whether any was taken,
    /// and whether one ran a command.
    private func takeLines(_ budget: inout TurnBudget) -> (progressed: Bool, ranCommand: Bool) {
        var progressed = false, ranCommand = false
        while !budget.spent, !host.stopping || importing != nil,
              machine.takesLine(pendingOutput: pendingOutput, importPaused: importPaused),
              let event = nextEvent() {
            progressed = true
            defer { budget.spend(now: host.now()) }
            switch machine.route(event) {
            case .proxyHeader(let event):
                takeProxyHeader(event)
            case .run(let line):
                ranCommand = true
                run(line)
            case .gather(let event):
                gather(event)
            case .drop:
                break
            case .tooLong(let length):
                host.metrics.add(.linesTooLong)
                let why = framer.maxLineLength < settings.maxLineLength ? " before sign-in" : ""
                append(.error(.limit, "line too long (\(length)+ bytes; the limit is \(framer.maxLineLength)\(why))"))
            case .invalid(let reason):
                append(.error(.syntax, reason))
            }
        }
        return (progressed, ranCommand)
    }

    /// The board shows the turn's last command, from when the turn ran it.
    private func boardShowsCommand() {
        boardEntry.verb = session.currentVerb
        boardEntry.commandStarted = lastActivity
        boardEntry.running = true
    }

    /// Writes what the socket takes of the `held` bytes; false when the connection failed.
    private func flushOutput(held: Int) -> Bool {
        let flushed = flush()
        host.metrics.add(.bytesOut, held - pendingOutput)
        boardEntry.bytesOut += held - pendingOutput
        if pendingOutput < held { streamSink?.taken(at: host.now()) }
        return flushed != .failed
    }

    /// The stages after a turn's lines, each as the machine says.
    private func betweenSteps(budgetSpent spent: Bool) {
        if machine.continuesNextTurn(budgetSpent: spent) {
            host.nextTurn { [self] in if !closed { service() } }  // more lines wait
        }
        if machine.pushesEvents && (!events.isEmpty || events.dropped > 0) { host.pushEvents(self) }
        if let sink = waitingSink, machine.releasesSink(pendingOutput: pendingOutput) {
            waitingSink = nil
            sink.release(gone: false)
        }
        if machine.closesNow(pendingOutput: pendingOutput, budgetSpent: spent) {
            return host.closeConnection(self, graceful: true)
        }
        host.publish(self)
        // Stopping, and this session's last step (an IMPORT's too) is answered: hand it off.
        if machine.handsOffNow(stopping: host.stopping, importing: importing != nil) {
            return host.farewell(self)
        }
        if machine.switchesTransport(pendingOutput: pendingOutput) {
            guard switchToTLS() else { return host.closeConnection(self, graceful: false) }
        }
        if let interest = machine.interest(pendingOutput: pendingOutput, bufferedBytes: framer.bufferedByteCount,
                                           importPaused: importPaused, transportWantsRead: transport.wantsRead,
                                           transportWantsWrite: transport.wantsWrite) {
            host.wait(self, for: interest)
        }
    }

    /// STARTTLS answered and written: the rest of the connection is TLS.
    private func switchToTLS() -> Bool {
        guard let secure = host.secureTransport(for: self) else { return false }
        transport = secure
        // Nothing the client sent before its handshake counts (it could have been injected).
        framer.discardBuffered()
        pushedBack = nil
        session.secure = true
        machine.switchedTransport()
        return true
    }

    // MARK: - Steps

    /// One command line: answered here, or handed to the host as database work.
    func run(_ line: String) {
        let verb = Verb.of(line)  // once a line: the loop's choice, then the session's
        if Self.isRead(verb) { return runReads(line) }
        let limit = settings.maxReplyBytes
        switch session.handle(line, verb: verb) {
        case .reply(let reply):
            append(reply, limit: limit)
            machine.stepped(.reply)
        case .close(let reply):
            append(reply, limit: limit)
            machine.stepped(.quit)  // its pending changes are dropped, nothing to resume
        case .skipData(let reply):
            append(reply, limit: limit)
            machine.stepped(.skipData)
        case .startTLS(let reply):
            append(reply, limit: limit)
            machine.stepped(.startTLS)
        case .collect(let job):
            importing = ImportState(job: job, feed: host.importFeed(for: self))
            framer.keepsCarriageReturns = true
            machine.stepped(.collect)
        case .database(let work):
            host.submit(self, [.work(work)])
        case .cancel(let target, let key):
            host.cancel(session: target, key: key, from: self)
            append(.ok("cancel request sent"), limit: limit)
            machine.stepped(.reply)
        }
    }

    /// A read and the reads pipelined right behind it: parsed here (the session is the
    /// loop's), and one pool job runs their database work in order on one connection and
    /// hands back their replies at once, or ahead of a FIND's streamed records.
    func runReads(_ first: String) {
        var lines = [first]
        while lines.count < Self.maxBatch, let event = nextEvent() {
            guard case .line(let line) = event, Self.isRead(Verb.of(line)) else {
                pushedBack = event
                break
            }
            lines.append(line)
        }
        let limit = settings.maxReplyBytes
        let items: [BatchItem] = lines.map { line in
            switch session.handle(line) {
            case .database(let work): .work(work)
            case .reply(let reply), .close(let reply), .skipData(let reply), .startTLS(let reply): .reply(Server.encoded(reply, limit: limit))
            case .collect: .reply(Server.encoded(.error(.internal, "IMPORT in a batch of reads"), limit: limit))
            case .cancel: .reply(Server.encoded(.error(.internal, "CANCEL in a batch of reads"), limit: limit))
            }
        }
        host.submit(self, items)
    }

    /// Reads pipelined by one session that run as one pool job, at most.
    static let maxBatch = 64

    /// Whether a line of `verb` may join a batch of reads (the verb table says).
    static func isRead(_ verb: Verb?) -> Bool { verb?.facts.batchable ?? false }

    /// The first line from a trusted balancer: the client it carries becomes the session's
    /// peer. Anything else, a line too long or not text included, ends the connection (a
    /// balancer that sends no header is misconfigured, and its clients would all share its
    /// address).
    func takeProxyHeader(_ event: LineFramer.Event) {
        let parsed: Result<ProxyHeader.Parsed, ProxyHeader.Invalid>
        switch event {
        case .line(let line): parsed = ProxyHeader.parse(line)
        case .tooLong: parsed = .failure(ProxyHeader.Invalid(reason: "longer than \(ProxyHeader.maxLength) bytes"))
        case .invalid: parsed = .failure(ProxyHeader.Invalid(reason: "not a PROXY protocol v1 header"))
        }
        switch parsed {
        case .success(.client(let address)):
            session.proxied(for: address)
            Log.debug("proxied for \(address) by \(peer)", session: id)
        case .success(.unknown):
            break
        case .failure(let invalid):
            host.warnOnce("a connection from \(peer) (--proxy-from) began without a PROXY header: \(invalid.reason)")
            append(.error(.syntax, "expected a PROXY protocol v1 header from this balancer (--proxy-from): \(invalid.reason)"),
                   limit: settings.maxReplyBytes)
            machine.stepped(.close)
        }
    }

    // MARK: - Replies

    /// A step's replies came back from the pool (its effects on the session already applied).
    func completed(bytes: [UInt8]) {
        guard !closed else { return }
        streamSink = nil
        machine.databaseFinished(stopping: host.stopping)
        if let resumed = session.takeResumedDurably() {
            // Written with the RESUME under a new token: the client learns it before the reply.
            if let previous = durableToken, previous != resumed.token { host.durableSessionEnded(previous, quit: true) }
            durableToken = resumed.token
            durableOwner = session.handOffOwner
            announced = true
            writtenVersion = session.stateVersion
            push(Notice.handOff(token: resumed.token, pending: resumed.pending, ttl: settings.resumeTTL).text)
        }
        append(bytes: bytes)
        if session.movedAway {
            // Resumed elsewhere: its state is the other copy's, this connection ends.
            durableToken = nil
            machine.closeWhenIdle()
            return service()
        }
        // Signed in: the full line length from now on.
        if framer.maxLineLength < settings.maxLineLength, session.user != nil {
            framer.maxLineLength = settings.maxLineLength
        }
        if machine.handsOffAfterStep(stopping: host.stopping) { return host.farewell(self) }
        if !session.watches.isEmpty { host.startLedgers(for: self) }
        service()
    }

    /// Streamed data lines of a step still running; `sink` waits until the output drains.
    func deliver(_ lines: [UInt8], sink: StreamSink) {
        guard !closed else { return sink.release(gone: true) }
        append(bytes: lines)
        waitingSink = sink
        service()
    }
}
