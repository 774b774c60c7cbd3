import Foundation
import Testing
@testable import Records

/// The hand-over between a split read's leader and helper, without a database: who reads the
/// second half, what the leader passes on, and that neither waits for the other forever.
@Suite struct SplitReadUnitTests {
    /// Takes what it is sent; says stop after `accepting` sends.
    final class Collecting: LineSink, @unchecked Sendable {
        var sent: [[UInt8]] = []
        var accepting = Int.max
        func send(_ lines: [UInt8]) -> Bool {
            sent.append(lines)
            return sent.count < accepting
        }
        var stalled: Bool { false }
        var stopping: Bool { false }
        var left: Bool { false }
    }

    @Test func theSecondHalfIsClaimedOnce() {
        let leaderFirst = SplitRead()
        #expect(leaderFirst.leaderTakesSecondHalf())
        #expect(!leaderFirst.helperBegins())

        let helperFirst = SplitRead()
        #expect(helperFirst.helperBegins())
        helperFirst.imported(true)
        #expect(!helperFirst.leaderTakesSecondHalf())

        // An import that failed leaves the half to the leader.
        let failed = SplitRead()
        #expect(failed.helperBegins())
        failed.imported(false)
        #expect(failed.leaderTakesSecondHalf())

        // Once the leader stopped, a helper that comes late does nothing.
        let stopped = SplitRead()
        stopped.stop()
        #expect(!stopped.helperBegins())
    }

    /// Runs `body` on a thread of its own (both sides block, as pool workers do: the
    /// cooperative pool's few threads would deadlock) and gives its value once it ends.
    final class Running<Value>: @unchecked Sendable {  // `value` written before `done` is signalled
        private var result: Value?
        private let done = DispatchSemaphore(value: 0)
        init(_ body: @escaping @Sendable () -> Value) {
            Thread.detachNewThread { [self] in
                result = body()
                done.signal()
            }
        }
        var value: Value {
            done.wait()
            return result!
        }
    }

    /// The leader waits for the helper's import (its transaction exported the snapshot), not
    /// longer.
    @Test func theLeaderWaitsForTheImportOnly() {
        let split = SplitRead()
        #expect(split.helperBegins())
        let answer = Running { split.leaderTakesSecondHalf() }
        usleep(20_000)
        split.imported(true)
        #expect(answer.value == false)
    }

    /// The helper's batches reach the client in order with their records counted; it waits
    /// while `heldBatches` wait, and stops when the client does.
    @Test func batchesArePassedOnAndTheHelperWaitsForRoom() throws {
        let split = SplitRead()
        #expect(split.helperBegins())
        split.imported(true)
        let helper = Running {
            var held = 0
            for index in 0..<(SplitRead.heldBatches + 3) where split.hold([UInt8(index)], records: 2) { held += 1 }
            split.helperEnded(versions: [], failure: nil)
            return held
        }
        let sink = Collecting()
        // The leader between its own batches, then once its half is done.
        _ = split.forward(to: sink, until: .distantFuture)
        _ = try split.drain(to: sink, after: 0, until: .distantFuture)
        #expect(helper.value == SplitRead.heldBatches + 3)
        #expect(sink.sent == (0..<(SplitRead.heldBatches + 3)).map { [UInt8($0)] })
        #expect(split.forwarded == 2 * (SplitRead.heldBatches + 3))

        // A client that stops: the helper's next batch is refused, and it is not left waiting.
        let stopping = SplitRead()
        #expect(stopping.helperBegins())
        stopping.imported(true)
        let refused = Running {
            var held = 0
            while stopping.hold([1], records: 1) { held += 1 }
            return held
        }
        let gone = Collecting()
        gone.accepting = 1
        _ = try stopping.drain(to: gone, after: 0, until: .distantFuture)
        #expect(refused.value <= SplitRead.heldBatches + 1)
        #expect(gone.sent.count == 1)
    }

    /// The helper's failure reaches the leader once its batches are passed on; its versions
    /// fill what the leader's leave of the limit.
    @Test func theHelpersEndReachesTheLeader() throws {
        let failing = SplitRead()
        #expect(failing.helperBegins())
        failing.imported(true)
        #expect(failing.hold([7], records: 1))
        failing.helperEnded(versions: [], failure: CommandError(.unavailable, "gone"))
        let sink = Collecting()
        #expect(throws: CommandError.self) { try failing.drain(to: sink, after: 0, until: .distantFuture) }
        #expect(sink.sent == [[7]])

        let ended = SplitRead()
        #expect(ended.helperBegins())
        ended.imported(true)
        let key = RecordKey(entity: "employee", values: ["1"])
        ended.helperEnded(versions: Array(repeating: (key, "@1:1:"), count: 5), failure: nil)
        #expect(try ended.drain(to: sink, after: ReadVersions.limit - 2, until: .distantFuture).count == 2)
    }

    /// Past the deadline the leader passes on the batch in hand, then stops the helper; the
    /// helper's error then (PostgreSQL's own limit, a second later) is not the answer.
    @Test func theDeadlineStopsThePassingOn() throws {
        let late = SplitRead()
        #expect(late.helperBegins())
        late.imported(true)
        #expect(late.hold([1], records: 1) && late.hold([2], records: 1))
        let sink = Collecting()
        #expect(!late.forward(to: sink, until: .now()))
        #expect(late.expired && sink.sent == [[1]] && late.forwarded == 1)
        #expect(!late.hold([3], records: 1))  // stopped

        let cancelled = SplitRead()
        #expect(cancelled.helperBegins())
        cancelled.imported(true)
        cancelled.helperEnded(versions: [], failure: CommandError(.limit, "cancelled"))
        #expect(try cancelled.drain(to: sink, after: 0, until: .now()).isEmpty)
        #expect(cancelled.expired)
    }

    @Test func theProbesAnswerSaysWhereTheHalvesMeet() {
        #expect(SplitRead.Plan(["4000", "00000003-1"])?.middle == 2000)
        #expect(SplitRead.Plan(["4000", "00000003-1"])?.exported == "00000003-1")
        #expect(SplitRead.Plan([String(SplitRead.minimumBlocks - 1), "x"]) == nil)  // small: one piece
        #expect(SplitRead.Plan(["4000", nil]) == nil)  // nothing exported
        #expect(SplitRead.Plan([nil, nil]) == nil)  // not an ordinary table
    }

    /// The statement each half runs: the whole read's, limited to its blocks by a TID range,
    /// the bounds inlined as the other values are.
    @Test func eachHalfReadsItsBlocks() throws {
        let request = FetchRequest(entity: "employee")
        let half = try QueryBuilder.select(request, model: SampleModel.model, versions: .keys, splittable: true)
        let whole = try QueryBuilder.select(request, model: SampleModel.model, versions: .keys)
        #expect(half.sql == whole.sql + " WHERE t0.ctid >= $1::tid AND t0.ctid < $2::tid")
        #expect(half.wholeTable == nil && whole.wholeTable != nil)
        let quote = { (text: String) in "'" + text + "'" }
        #expect(half.copyOut(blocks: 10..<QueryBuilder.Select.endBlock, literal: quote)
                == "COPY (" + whole.sql + " WHERE t0.ctid >= '(10,0)'::tid AND t0.ctid < '(4294967295,0)'::tid) TO STDOUT")
    }
}
