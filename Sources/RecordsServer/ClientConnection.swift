#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Postgres
import Records

/// One client on the event loop: its transport, framer, pending output, session, and the
/// state machine that says what to do with them; its handler (`ClientConnection+Handler`)
/// answers its events. Confined to the loop: pool workers refer to it by `id` in the messages
/// they post back.
final class ClientConnection {
    let id: Int
    /// The server it belongs to: what all connections share.
    unowned let host: any ConnectionHost
    let settings: ConnectionSettings
    /// Plain, or TLS (from the start, or after STARTTLS).
    var transport: Transport
    var fd: Int32 { transport.fd }
    let session: Session
    /// Its database job, for a CANCEL from another connection; made with its first job (an
    /// idle session holds none).
    private(set) lazy var cancelBox = CancelBox()
    let peer: String
    var framer: LineFramer
    var machine: ConnectionStateMachine
    private(set) var output: [UInt8] = []
    private var outputStart = 0
    /// How long this client's jobs held a pooled connection: its standing with the pool.
    var poolUse = PoolUse()
    var lastActivity: UInt64
    let connectedAt: UInt64
    /// Its line on the operators' board (`SessionBoard`) as the loop keeps it, and as last
    /// published: only a change takes the board's lock.
    var boardEntry: SessionBoard.Entry
    var boardPublished: SessionBoard.Entry?
    /// An IMPORT taking its lines up to `.`.
    var importing: ImportState?
    /// The IMPORT's COPY has not caught up with the data: read no more for now.
    var importPaused: Bool { importing.map { $0.started && $0.feed.isFull } ?? false }
    /// Change events not yet pushed (only between replies), oldest first, bounded.
    var events = PushQueue()
    /// A line taken from the framer but not yet run (it ended a batch of reads).
    var pushedBack: LineFramer.Event?
    /// A streaming step waiting for the output to drain below the high-water mark.
    var waitingSink: StreamSink?
    /// --durable-units: the token its state is written under (told to the client with the
    /// first write), and the session's `stateVersion` last written.
    var durableToken: String?
    var writtenVersion = 0
    /// Whose `durableToken` is (`Session.handOffOwner` when it was given).
    var durableOwner: String?
    var announced = false
    /// The running step's stream, stopped when the server must stop.
    var streamSink: StreamSink?
    /// Its state is being written for RESUME (the shutdown waits for that longer than for steps).
    var handingOff = false
    /// Shutting down: it was handed off and its token is among its unread output (the shutdown
    /// waits past the grace for a slow reader to reach it; a client owed only goodbye is not).
    var owesNotice = false

    /// `awaitsProxyHeader`: from a trusted balancer (--proxy-from), its first line is a PROXY
    /// header.
    init(id: Int, host: any ConnectionHost, settings: ConnectionSettings, transport: Transport, session: Session, peer: String,
         maxLineLength: Int, highWater: Int, awaitsProxyHeader: Bool = false, now: UInt64) {
        self.id = id
        self.host = host
        self.settings = settings
        self.transport = transport
        self.session = session
        self.peer = peer
        self.framer = LineFramer(maxLineLength: maxLineLength)
        self.machine = ConnectionStateMachine(highWater: highWater, awaitsProxyHeader: awaitsProxyHeader)
        self.lastActivity = now
        self.connectedAt = now
        self.boardEntry = SessionBoard.Entry(id: id, user: nil, address: peer, tls: session.secure, connectedAt: Date(), pending: 0,
                                             verb: nil, running: false, commandStarted: now, bytesIn: 0, bytesOut: 0, watching: 0)
    }

    var pendingOutput: Int { output.count - outputStart }
    var closed: Bool { machine.isClosed }
    var busy: Bool { machine.isBusy }

    func append(_ reply: Reply) { reply.encode(into: &output) }

    func append(bytes: [UInt8]) {
        // Nothing waiting: the bytes become the output rather than being copied into it (a
        // FIND hands its records over in 256 KiB batches; the copy was a tenth of its CPU).
        guard outputStart < output.count else {
            output = bytes
            outputStart = 0
            return
        }
        output.append(contentsOf: bytes)
    }

    /// A reply written straight into the output (no array of its own: every pipelined INSERT
    /// is answered here).
    func append(_ reply: Reply, limit: Int) { Server.encode(reply, into: &output, limit: limit) }

    /// The next request: a pushed-back one first.
    func nextEvent() -> LineFramer.Event? {
        if let event = pushedBack {
            pushedBack = nil
            return event
        }
        return framer.next()
    }

    /// A pushed line (`! ...`); only ever appended between whole replies.
    func push(_ event: String) {
        output.append(UInt8(ascii: "!"))
        output.append(UInt8(ascii: " "))
        output.append(contentsOf: event.utf8)
        output.append(UInt8(ascii: "\n"))
    }

    /// A pushed line already rendered (`! ...\n`).
    func push(bytes: [UInt8]) { output.append(contentsOf: bytes) }

    enum FlushResult { case drained, blocked, failed }

    /// Writes what the transport takes now.
    func flush() -> FlushResult {
        while outputStart < output.count {
            let result = output.withUnsafeBytes { raw in
                transport.write(UnsafeRawBufferPointer(rebasing: raw[outputStart...]))
            }
            switch result {
            case .wrote(let count) where count > 0: outputStart += count
            case .wrote, .wouldBlock: return .blocked
            case .failed: return .failed
            }
        }
        output.removeAll(keepingCapacity: output.count <= 4096)
        outputStart = 0
        return .drained
    }
}

/// An IMPORT in progress. Its data lines go to `feed` in chunks; the COPY starts once a chunk
/// is full or the data is complete, so an import typed by hand never holds a pooled
/// connection while its lines are typed, and a large one streams in flat memory.
/// Whatever happens to the COPY, its reply goes out only after the client's `.`.
struct ImportState {
    let job: ImportJob
    let feed: ImportFeed
    var header: String?
    var chunk: [UInt8] = []
    /// The data so far ends inside a quoted CSV field (which may hold line breaks).
    var inQuotedField = false
    var lines = 0
    var started = false
    /// The COPY's reply when it ended before the `.` (a bad header, a stall, PostgreSQL
    /// gone): held until the `.`, so replies stay in order.
    var reply: [UInt8]?

    init(job: ImportJob, feed: ImportFeed) {
        self.job = job
        self.feed = feed
    }
}
