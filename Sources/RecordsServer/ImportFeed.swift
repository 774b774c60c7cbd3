import Foundation
import Postgres
import Records

/// An IMPORT's data on its way from the event loop, which frames the client's lines, to the
/// COPY running on a pool worker. Bounded: past `highWater` queued bytes the loop stops
/// reading that client until the worker has taken enough (`onRoom`), so memory stays flat
/// whatever the size of the import.
final class ImportFeed: @unchecked Sendable {  // all state guarded by `condition`
    static let highWater = 4 << 20
    static let lowWater = 1 << 20

    private let condition = NSCondition()
    private var chunks: [[UInt8]] = []
    private var head = 0
    private var queued = 0
    private var ended = false
    private var wasFull = false
    private var failureReply: Reply?
    /// Called on the worker when a full feed has room again.
    private let onRoom: @Sendable () -> Void
    /// How long the COPY waits for data before giving up (it holds a pooled connection).
    private let stallSeconds: Int

    init(stallSeconds: Int, onRoom: @escaping @Sendable () -> Void) {
        self.stallSeconds = stallSeconds
        self.onRoom = onRoom
    }

    // MARK: - The loop's side

    func push(_ chunk: [UInt8]) {
        guard !chunk.isEmpty else { return }
        condition.lock()
        defer { condition.unlock() }
        guard !ended else { return }
        chunks.append(chunk)
        queued += chunk.count
        if queued >= Self.highWater { wasFull = true }
        condition.signal()
    }

    var isFull: Bool {
        condition.lock()
        defer { condition.unlock() }
        return queued >= Self.highWater
    }

    /// The `.` line arrived: the data is complete.
    func finish() {
        condition.lock()
        ended = true
        condition.signal()
        condition.unlock()
    }

    /// Whether data is still taken (the feed has not been finished, failed or abandoned).
    var accepting: Bool {
        condition.lock()
        defer { condition.unlock() }
        return !ended
    }

    /// The import cannot succeed (a bad line, the client gone): the COPY is aborted, and
    /// `reply` answers the IMPORT in place of the COPY's own outcome. The first failure wins.
    func fail(_ reply: Reply) {
        condition.lock()
        if !ended { end(failing: reply) }
        condition.unlock()
    }

    // MARK: - The worker's side

    /// The COPY has ended: data still to come is dropped.
    func abandon() {
        condition.lock()
        end(failing: nil)
        condition.unlock()
    }

    /// Takes no more data and drops what is queued. Under `condition`.
    private func end(failing reply: Reply?) {
        if failureReply == nil { failureReply = reply }
        ended = true
        chunks.removeAll()
        head = 0
        queued = 0
        condition.signal()
    }

    /// The next chunk for COPY, waiting for the loop when none is queued yet; after
    /// `stallSeconds` without data the import fails, so a client that stops sending cannot
    /// keep a pooled connection.
    func next() -> Connection.CopyChunk {
        condition.lock()
        let deadline = Date().addingTimeInterval(Double(stallSeconds))
        while head == chunks.count && !ended {
            if !condition.wait(until: deadline) && head == chunks.count && !ended {
                end(failing: .error(.limit, "IMPORT: no data for \(stallSeconds) s while its COPY held a connection; nothing was imported"))
            }
        }
        if let failure = failureReply {
            condition.unlock()
            return .abort(failure.statusLine)
        }
        guard head < chunks.count else {
            condition.unlock()
            return .end
        }
        let chunk = chunks[head]
        chunks[head] = []
        head += 1
        if head == chunks.count {
            chunks.removeAll(keepingCapacity: true)
            head = 0
        }
        queued -= chunk.count
        let room = wasFull && queued < Self.lowWater
        if room { wasFull = false }
        condition.unlock()
        if room { onRoom() }
        return .data(chunk)
    }

    /// What answers the IMPORT instead of the COPY's outcome, if the loop failed it.
    var failure: Reply? {
        condition.lock()
        defer { condition.unlock() }
        return failureReply
    }
}
