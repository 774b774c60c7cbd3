#if canImport(Glibc)
import Glibc
#endif
import Postgres
import Records

/// One client socket on the event loop: its framer, its pending output and its session.
/// Confined to the loop thread, except `session`, which a pool worker borrows while `busy`.
final class ClientConnection {
    let fd: Int32
    let session: Session
    let peer: String
    var framer: LineFramer
    private(set) var output: [UInt8] = []
    private var outputStart = 0
    /// A database step is running on a pool worker: no new line is taken meanwhile.
    var busy = false
    /// How long this client's jobs held a pooled connection: its standing with the pool.
    var poolUse = PoolUse()
    /// The running step has been slow: replies held behind it go out without waiting.
    var flushHeldReplies = false
    /// The peer sent FIN: answer what it sent, then close.
    var peerClosed = false
    var closeAfterFlush = false
    var closed = false
    var lastActivity: UInt64
    var interest: UInt32 = 0
    /// A refused IMPORT's data is being dropped, up to `.`.
    var skippingData = false
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

    init(fd: Int32, session: Session, peer: String, maxLineLength: Int, now: UInt64) {
        self.fd = fd
        self.session = session
        self.peer = peer
        self.framer = LineFramer(maxLineLength: maxLineLength)
        self.lastActivity = now
    }

    var pendingOutput: Int { output.count - outputStart }

    func append(_ reply: Reply) { reply.encode(into: &output) }

    func append(bytes: [UInt8]) { output.append(contentsOf: bytes) }

    /// The next request: a pushed-back one first.
    func nextEvent() -> LineFramer.Event? {
        if let event = pushedBack {
            pushedBack = nil
            return event
        }
        return framer.next()
    }

    /// Data lines of a reply still being produced (streamed records, already framed).
    func appendDataLines(_ lines: [UInt8]) {
        output.append(contentsOf: lines)
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

    /// Writes what the socket takes now.
    func flush() -> FlushResult {
        while outputStart < output.count {
            let written = output.withUnsafeBytes { raw in
                send(fd, raw.baseAddress! + outputStart, output.count - outputStart, Int32(MSG_NOSIGNAL))
            }
            if written > 0 {
                outputStart += written
                continue
            }
            if written < 0 && errno == EINTR { continue }
            if written < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) { return .blocked }
            return .failed
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
