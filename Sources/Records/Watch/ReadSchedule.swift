/// When a server's change-log reader reads next, and whether writers need to wake it.
///
/// A reader is either woken or polling. Woken (`quiet`), it holds the quiet lock shared and
/// reads when a writer's NOTIFY comes, soon again after a read that found changes, and at
/// least every `quietSeconds`. Under a stream of writes it polls instead: it lets go of the
/// quiet lock and reads every `pollSeconds`, and writers that find the lock held by nobody
/// (every server polling) commit without NOTIFY. PostgreSQL signals every listening backend of
/// the database at every commit that notified, whatever the channel: under 64 clients' SAVEs
/// to a watched table that cost the listening backend half a core.
///
/// A writer decides at its commit (a deferred trigger), and one that skips the NOTIFY holds
/// the skip lock shared until its commit ends, however late that is (a lock wait after the
/// decision, a prepared transaction). A reader that takes the quiet lock back keeps polling,
/// asking whether any such writer is still in flight, until none is, then reads once more:
/// every change that woke nobody is read. Pure: the watcher does what it says.
///
/// A polling read that found a stream of changes (`streamKeys`, over ~4,000 a second) waits
/// `streamSeconds` for the next: each read costs the server and PostgreSQL about half a
/// millisecond of CPU whatever it finds (the log's query, each watching user's policy check,
/// the fan-out), which at 9,000 one-insert SAVEs a second was a fifth of a watched SAVE's
/// cost. Events then wait up to 20 ms to be read under such a stream, and 5 ms otherwise.
public struct ReadSchedule: Sendable, Equatable {
    public enum Mode: Sendable, Equatable {
        case polling
        /// Holding the quiet lock: writers wake this reader.
        case quiet
    }

    /// What the watcher does with the quiet lock after a read.
    public enum Action: Sendable, Equatable {
        case none
        /// `pg_advisory_unlock_shared`, then read every `pollSeconds`.
        case releaseQuietLock
        /// `pg_try_advisory_lock_shared`; its answer goes to `quietLock(taken:)`.
        case takeQuietLock
        /// Whether a writer that skipped its NOTIFY is still in flight (the skip lock cannot
        /// be taken exclusively); the answer goes to `skippers(inFlight:)`.
        case checkSkippers
    }

    /// Reads a second while polling, and soon after a read that found changes.
    public static let pollSeconds = 0.005
    /// Reads a second while polling a stream of changes.
    public static let streamSeconds = 0.02
    /// Keys a polling read finds that make the next wait `streamSeconds` (at 5 ms, 4,000 a
    /// second; at 20 ms the stream must keep 1,000 a second to keep it).
    static let streamKeys = 20
    /// The longest a woken reader goes without reading (the log's cursor keeps moving).
    public static let quietSeconds = 1.0
    /// Consecutive reads that found changes before the reader polls: a stream, not one SAVE.
    static let busyReadsToPoll = 4
    /// Consecutive empty reads while polling before the reader asks to be woken again.
    static let emptyReadsToQuiet = 40

    /// Polling until the quiet lock is held (a connected reader asks for it first): nobody
    /// wakes a reader that does not hold it.
    public private(set) var mode: Mode = .polling
    /// Seconds to the next read (a NOTIFY reads at once).
    public private(set) var interval = pollSeconds
    private var busyReads = 0
    private var emptyReads = 0
    /// Quiet again, but writers that skipped their NOTIFY may still be in flight.
    private var settling = false

    public init() {}

    /// The wait, in poll(2)'s milliseconds, for a read due in `seconds`: rounded up, or the
    /// last fraction of a millisecond before each read became a loop of zero-length polls
    /// (up to a fifth of a core at 200 reads a second), and at most half a second, so that the
    /// watcher looks at its other duties.
    public static func pollMilliseconds(_ seconds: Double) -> Int32 {
        Int32(min(500, max(0, (seconds * 1000).rounded(.up))))
    }

    /// After each read of the log, with the number of changed keys it found.
    public mutating func read(changes: Int) -> Action {
        if changes > 0 {
            busyReads += 1
            emptyReads = 0
        } else {
            busyReads = 0
            emptyReads += 1
        }
        switch mode {
        case .polling:
            interval = changes >= Self.streamKeys ? Self.streamSeconds : Self.pollSeconds
            return emptyReads >= Self.emptyReadsToQuiet ? .takeQuietLock : .none
        case .quiet:
            if busyReads >= Self.busyReadsToPoll {
                mode = .polling
                interval = Self.pollSeconds
                emptyReads = 0
                settling = false
                return .releaseQuietLock
            }
            if settling {
                interval = Self.pollSeconds
                return .checkSkippers
            }
            interval = changes > 0 ? Self.pollSeconds : min(interval * 4, Self.quietSeconds)
            return .none
        }
    }

    /// The answer to `takeQuietLock`. Not taken (someone holds it exclusively: a writer for a
    /// moment, or a session that keeps it): the reader goes on polling and asks again later.
    public mutating func quietLock(taken: Bool) {
        emptyReads = 0
        busyReads = 0
        guard taken else { return }
        mode = .quiet
        settling = true
        interval = Self.pollSeconds
    }

    /// The answer to `checkSkippers`. None in flight: what they committed is visible, and the
    /// next read, already due at `pollSeconds`, finds it; until then the reader keeps polling.
    public mutating func skippers(inFlight: Bool) {
        guard mode == .quiet, settling, !inFlight else { return }
        settling = false
    }
}
