import Testing
@testable import Records

/// The change-log reader's schedule: when it polls (writers then skip their NOTIFY) and when it
/// holds the quiet lock and waits to be woken.
@Suite struct ReadScheduleTests {
    /// Reads the schedule through `reads` (true: the read found changes), answering every
    /// request for the lock with `granted`; returns the actions asked for, in order.
    private func run(_ schedule: inout ReadSchedule, _ reads: [Bool], granted: Bool = true) -> [ReadSchedule.Action] {
        reads.map { found in
            let action = schedule.read(foundChanges: found)
            if action == .takeQuietLock { schedule.quietLock(taken: granted) }
            return action
        }.filter { $0 != .none }
    }

    @Test func aReaderPollsUntilItHoldsTheQuietLock() {
        var schedule = ReadSchedule()
        #expect(schedule.mode == .polling && schedule.interval == ReadSchedule.pollSeconds)
        schedule.quietLock(taken: false)
        #expect(schedule.mode == .polling)
        #expect(schedule.read(foundChanges: false) == .none && schedule.interval == ReadSchedule.pollSeconds)
        schedule.quietLock(taken: true)
        #expect(schedule.mode == .quiet)
    }

    @Test func aQuietReaderBacksOffOnlyAfterItsGraceReads() {
        var schedule = ReadSchedule()
        schedule.quietLock(taken: true)
        // Writers that decided while it polled commit within the grace: read every 5 ms.
        for _ in 0..<ReadSchedule.graceReads {
            #expect(schedule.read(foundChanges: false) == .none)
            #expect(schedule.interval == ReadSchedule.pollSeconds)
        }
        var intervals: [Double] = []
        for _ in 0..<6 {
            _ = schedule.read(foundChanges: false)
            intervals.append(schedule.interval)
        }
        #expect(intervals == [0.02, 0.08, 0.32, 1.0, 1.0, 1.0])
        // One SAVE's change: read again soon, stay woken.
        #expect(schedule.read(foundChanges: true) == .none)
        #expect(schedule.interval == ReadSchedule.pollSeconds && schedule.mode == .quiet)
    }

    @Test func aStreamOfChangesTurnsTheReaderToPollingAndQuietReturnsIt() {
        var schedule = ReadSchedule()
        schedule.quietLock(taken: true)
        let busy = Array(repeating: true, count: ReadSchedule.busyReadsToPoll)
        #expect(run(&schedule, busy) == [.releaseQuietLock])
        #expect(schedule.mode == .polling)
        // Changes now and then keep it polling; a long enough quiet asks for the lock again.
        let gaps = Array(repeating: false, count: ReadSchedule.emptyReadsToQuiet - 1)
        #expect(run(&schedule, gaps + [true] + gaps) == [])
        #expect(run(&schedule, [false]) == [.takeQuietLock])
        #expect(schedule.mode == .quiet && schedule.interval == ReadSchedule.pollSeconds)
    }

    @Test func changesAlternatingWithEmptyReadsKeepTheReaderWoken() {
        // One SAVE every other read is no stream: writers keep waking it.
        var schedule = ReadSchedule()
        schedule.quietLock(taken: true)
        let reads = (0..<200).map { $0 % 2 == 0 }
        #expect(run(&schedule, reads) == [])
        #expect(schedule.mode == .quiet)
    }

    @Test func aLockKeptBySomeoneElseLeavesTheReaderPolling() {
        // A session that holds the quiet lock exclusively costs reads, never a late change.
        var schedule = ReadSchedule()
        schedule.quietLock(taken: false)
        let quiet = Array(repeating: false, count: ReadSchedule.emptyReadsToQuiet * 3)
        #expect(run(&schedule, quiet, granted: false) == [.takeQuietLock, .takeQuietLock, .takeQuietLock])
        #expect(schedule.mode == .polling && schedule.interval == ReadSchedule.pollSeconds)
    }
}
