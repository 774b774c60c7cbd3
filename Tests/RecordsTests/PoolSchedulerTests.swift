import Testing
import Postgres

/// The pool's fairness, decided without threads: the clock is a number.
@Suite struct PoolSchedulerTests {
    let second: UInt64 = 1_000_000_000

    @Test func provenJobsGoFirstInArrivalOrder() {
        var scheduler = PoolScheduler<String>(size: 4)
        scheduler.enqueue("u1", .unproven, at: 0)
        scheduler.enqueue("p1", .proven, at: 0)
        scheduler.enqueue("u2", .unproven, at: 0)
        scheduler.enqueue("p2", .proven, at: 0)
        #expect(scheduler.next(worker: 0, now: 0) == "p1")
        #expect(scheduler.next(worker: 1, now: 0) == "p2")
        #expect(scheduler.next(worker: 2, now: 0) == "u1")
        // Slow work may take three of four workers; only u1 is slow so far.
        #expect(scheduler.next(worker: 3, now: 0) == "u2")
        #expect(scheduler.queued == 0)
    }

    @Test func slowWorkNeverTakesTheLastWorker() {
        var scheduler = PoolScheduler<String>(size: 4)
        for index in 0..<6 { scheduler.enqueue("pin\(index)", .unproven, at: 0) }
        #expect(scheduler.next(worker: 0, now: 0) == "pin0")
        #expect(scheduler.next(worker: 1, now: 0) == "pin1")
        #expect(scheduler.next(worker: 2, now: 0) == "pin2")
        // Three slow jobs hold three workers: the fourth waits for a proven job.
        #expect(scheduler.next(worker: 3, now: 0) == nil)
        scheduler.enqueue("honest", .proven, at: 0)
        #expect(scheduler.next(worker: 3, now: 0) == "honest")
        scheduler.finished(worker: 3)
        #expect(scheduler.next(worker: 3, now: 10 * second) == nil)
        // A slow job finishes: the next unproven one takes its place, not the reserve.
        scheduler.finished(worker: 0)
        #expect(scheduler.next(worker: 0, now: 10 * second) == "pin3")
        #expect(scheduler.slowRunning(now: 10 * second) == 3)
    }

    @Test func provenJobsThatRunLongCountAsSlow() {
        var scheduler = PoolScheduler<String>(size: 3)
        scheduler.enqueue("big save", .proven, at: 0)
        scheduler.enqueue("other big save", .proven, at: 0)
        #expect(scheduler.next(worker: 0, now: 0) == "big save")
        #expect(scheduler.next(worker: 1, now: 0) == "other big save")
        scheduler.enqueue("stranger", .unproven, at: 0)
        // Neither has run a second yet: the stranger may take the last worker.
        #expect(scheduler.slowRunning(now: second / 2) == 0)
        #expect(scheduler.next(worker: 2, now: second / 2) == "stranger")
        scheduler.finished(worker: 2)
        scheduler.enqueue("stranger again", .unproven, at: 0)
        // Both now past a second: two of three workers are slow, the last is the reserve.
        #expect(scheduler.slowRunning(now: 2 * second) == 2)
        #expect(scheduler.next(worker: 2, now: 2 * second) == nil)
    }

    @Test func newClientsGoBeforeClientsWhoseWorkWasSlow() {
        var scheduler = PoolScheduler<String>(size: 2)
        scheduler.enqueue("slow again", .unproven, at: 0)
        scheduler.enqueue("first job", .new, at: 0)
        #expect(scheduler.next(worker: 0, now: 0) == "first job")
        // One slow job holds one of two workers: the other is the reserve.
        #expect(scheduler.next(worker: 1, now: 0) == nil)
        scheduler.finished(worker: 0)
        #expect(scheduler.next(worker: 0, now: 0) == "slow again")
    }

    @Test func aJobGivenBackIsTheNextOfItsLane() {
        var scheduler = PoolScheduler<String>(size: 4)
        scheduler.enqueue("p1", .proven, at: 0)
        scheduler.enqueue("p2", .proven, at: 0)
        scheduler.enqueue("n1", .new, at: 0)
        #expect(scheduler.next(worker: 0, now: 0) == "p1")
        // Worker 0 has no connection and cannot open one: p1 goes first again, to another.
        scheduler.giveBack("p1", worker: 0)
        #expect(scheduler.busy == 0 && scheduler.queued == 3)
        #expect(scheduler.next(worker: 1, now: 0) == "p1")
        #expect(scheduler.next(worker: 2, now: 0) == "p2")
        #expect(scheduler.next(worker: 3, now: 0) == "n1")
        scheduler.giveBack("n1", worker: 3)
        scheduler.enqueue("n2", .new, at: 0)
        #expect(scheduler.next(worker: 3, now: 0) == "n1")
    }

    /// Held-back work is not starved by a steady stream of proven work: once it has waited
    /// `agedAfter` (2 s), it goes first, still never into the reserve.
    @Test func heldBackJobsAgeAheadOfProvenOnes() {
        var scheduler = PoolScheduler<String>(size: 3)
        scheduler.enqueue("slow reader", .unproven, at: 0)
        scheduler.enqueue("new client", .new, at: second / 2)
        var now: UInt64 = 0
        // Proven jobs keep coming and keep both workers busy: before 2 s they go first.
        while now < 2 * second {
            scheduler.enqueue("proven", .proven, at: now)
            #expect(scheduler.next(worker: 0, now: now) == "proven")
            scheduler.finished(worker: 0)
            now += second / 4
        }
        scheduler.enqueue("proven", .proven, at: now)
        #expect(scheduler.next(worker: 0, now: now) == "slow reader")
        #expect(scheduler.next(worker: 1, now: now) == "proven")  // the new client is younger
        scheduler.finished(worker: 1)
        scheduler.enqueue("proven", .proven, at: now)
        scheduler.enqueue("pinned", .unproven, at: now)
        // Later the new client has waited past 2 s too, and one of two slow places is free.
        #expect(scheduler.next(worker: 1, now: now + 2 * second) == "new client")
        // Two slow jobs run: the last worker is the reserve, aged or not.
        #expect(scheduler.next(worker: 2, now: now + 4 * second) == "proven")
        scheduler.finished(worker: 2)
        #expect(scheduler.next(worker: 2, now: now + 4 * second) == nil)
    }

    @Test func aPoolOfOneHasNoReserve() {
        var scheduler = PoolScheduler<String>(size: 1)
        scheduler.enqueue("only", .unproven, at: 0)
        #expect(scheduler.next(worker: 0, now: 0) == "only")
    }

    @Test func drainingReturnsEveryQueuedJob() {
        var scheduler = PoolScheduler<Int>(size: 2)
        for index in 0..<3000 { scheduler.enqueue(index, index % 2 == 0 ? .proven : .unproven, at: 0) }
        for index in 0..<1500 { #expect(scheduler.next(worker: 0, now: 0) == index * 2); scheduler.finished(worker: 0) }
        #expect(scheduler.drain().count == 1500)
        #expect(scheduler.queued == 0)
    }

    @Test func standingIsEarnedByQuickJobsAndLostBySlowOnes() {
        var use = PoolUse()
        #expect(use.standing(now: 0) == .new)
        use.record(seconds: 0.002, now: 0)
        #expect(use.standing(now: 0) == .proven)
        use.record(seconds: 5, now: second)
        #expect(use.standing(now: second) == .unproven)
        // Quick jobs in between do not win it back while the slow one is recent ...
        for step in 0..<20 { use.record(seconds: 0.001, now: second * UInt64(2 + step)) }
        #expect(use.standing(now: 30 * second) == .unproven)
        // ... and once it is a minute old, they do.
        #expect(use.standing(now: 62 * second) == .proven)
    }

    @Test func streamingJobsNeverTakeTheLastWorkerWhateverTheClient() {
        var scheduler = PoolScheduler<String>(size: 4)
        for index in 0..<5 { scheduler.enqueue("find\(index)", .proven, streams: true, at: 0) }
        #expect(scheduler.next(worker: 0, now: 0) == "find0")
        #expect(scheduler.next(worker: 1, now: 0) == "find1")
        #expect(scheduler.next(worker: 2, now: 0) == "find2")
        #expect(scheduler.next(worker: 3, now: 0) == nil)
        scheduler.enqueue("get", .proven, at: 0)
        #expect(scheduler.next(worker: 3, now: 0) == "get")
        // A proven client's streaming job goes before new and unproven ones.
        scheduler.enqueue("stranger", .new, at: 0)
        scheduler.finished(worker: 0)
        #expect(scheduler.next(worker: 0, now: 0) == "find3")
    }
}
