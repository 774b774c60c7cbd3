import Foundation
import Postgres
import RecordsProtocol

/// How one connection's database job is stopped from the loop when another connection sends
/// `CANCEL s12 key` (PostgreSQL's cancel request is the model): the job registers its
/// statement's canceller while it runs; a cancel that comes while the job is queued or running
/// marks it, and its error replies then say CANCELLED (a cancelled statement fails as a timed-
/// out one would). A cancel with no job in flight stops nothing: the command had ended.
/// Touched by the loop and by the job's worker, under `lock`.
final class CancelBox: @unchecked Sendable {
    private let lock = NSLock()
    private var inFlight = false
    private var requested = false
    private var canceller: Canceller?
    /// The job in flight: a job's end, posted to the loop before its worker returns, may come
    /// after the loop submitted the next job.
    private var generation = 0

    /// On the loop, as a job is submitted: its generation, for `finished`.
    func submitted() -> Int {
        lock.withLock {
            inFlight = true
            requested = false
            generation &+= 1
            return generation
        }
    }

    /// On the worker, as the job begins: false when a cancel came while it waited (its works
    /// are then answered without running).
    func begin(_ canceller: Canceller?) -> Bool {
        lock.withLock {
            self.canceller = canceller
            return !requested
        }
    }

    /// Whether this job was asked to stop.
    var isRequested: Bool { lock.withLock { requested } }

    /// What a work of this job answers: an error of a cancelled job (a timed-out statement's, or
    /// PostgreSQL's cancel) says CANCELLED; any other reply stands. Asked only of errors, so a
    /// job's successful replies take no lock.
    func answer(_ reply: Reply) -> Reply {
        guard case .error = reply.status, isRequested else { return reply }
        return .cancelled
    }

    /// On the worker, as the job of `generation` ends (nothing when a later job is in flight).
    func finished(_ generation: Int) {
        lock.withLock {
            guard generation == self.generation else { return }
            inFlight = false
            canceller = nil
        }
    }

    /// From the loop: stops the job in flight, if any (false: none was).
    func cancel() -> Bool {
        let (wasInFlight, running): (Bool, Canceller?) = lock.withLock {
            guard inFlight else { return (false, nil) }
            requested = true
            // Once: a SAVE group's connection goes on to run the other members' SAVEs.
            defer { canceller = nil }
            return (true, canceller)
        }
        running?.cancel()
        return wasInFlight
    }
}
