import Testing
@testable import Records

/// The change-log reader's schedule: when it polls (writers then skip their NOTIFY) and when it
/// holds the quiet lock and waits to be woken.
@Suite struct ReadScheduleTests {
    /// Reads the schedule through `reads` (true: the read found changes), answering every
    /// request for the lock with `granted` and every question about skippers with `inFlight`;
    /// returns the actions asked for, in order, checks of skippers aside.
    private func run(_ schedule: inout ReadSchedule, _ reads: [Bool], granted: Bool = true, inFlight: Bool = false) -> [ReadSchedule.Action] {
        reads.map { found in
            let action = schedule.read(changes: found ? 1 : 0)
            if action == .takeQuietLock { schedule.quietLock(taken: granted) }
            if action == .checkSkippers { schedule.skippers(inFlight: inFlight) }
            return action
        }.filter { $0 != .none && $0 != .checkSkippers }
    }

    /// A reader that has just taken the quiet lock, with no skipper left in flight.
    private func settled() -> ReadSchedule {
        var schedule = ReadSchedule()
        schedule.quietLock(taken: true)
        _ = schedule.read(changes: 0)
        schedule.skippers(inFlight: false)
        _ = schedule.read(changes: 0)
        return schedule
    }

    @Test func aReaderPollsUntilItHoldsTheQuietLock() {
        var schedule = ReadSchedule()
        #expect(schedule.mode == .polling && schedule.interval == ReadSchedule.pollSeconds)
        schedule.quietLock(taken: false)
        #expect(schedule.mode == .polling)
        #expect(schedule.read(changes: 0) == .none && schedule.interval == ReadSchedule.pollSeconds)
        schedule.quietLock(taken: true)
        #expect(schedule.mode == .quiet)
    }

    /// A writer that decided not to notify may commit long after (a lock wait, a prepared
    /// transaction): the reader that asks to be woken again polls as long as one is in
    /// flight, then reads once more before it backs off.
    @Test func aQuietReaderPollsWhileWritersThatSkippedTheWakeUpAreInFlight() {
        var schedule = ReadSchedule()
        schedule.quietLock(taken: true)
        for _ in 0..<500 {
            #expect(schedule.read(changes: 0) == .checkSkippers)
            #expect(schedule.interval == ReadSchedule.pollSeconds)
            schedule.skippers(inFlight: true)
        }
        #expect(schedule.read(changes: 0) == .checkSkippers)
        schedule.skippers(inFlight: false)
        // The read that finds what they committed, soon; then no more checks.
        #expect(schedule.interval == ReadSchedule.pollSeconds)
        #expect(schedule.read(changes: 1) == .none)
        #expect(schedule.interval == ReadSchedule.pollSeconds)
        var intervals: [Double] = []
        for _ in 0..<6 {
            #expect(schedule.read(changes: 0) == .none)
            intervals.append(schedule.interval)
        }
        #expect(intervals == [0.02, 0.08, 0.32, 1.0, 1.0, 1.0])
        // One SAVE's change: read again soon, stay woken.
        #expect(schedule.read(changes: 1) == .none)
        #expect(schedule.interval == ReadSchedule.pollSeconds && schedule.mode == .quiet)
    }

    @Test func aStreamOfChangesTurnsTheReaderToPollingAndQuietReturnsIt() {
        var schedule = settled()
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
        var schedule = settled()
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

    /// Polling, a read that found a stream of changes makes the next wait longer (each read
    /// costs the same whatever it finds); a trickle, or quiet, reads at the short interval.
    @Test func aStreamOfChangesIsReadLessOften() {
        var schedule = ReadSchedule()
        #expect(schedule.read(changes: ReadSchedule.streamKeys - 1) == .none && schedule.interval == ReadSchedule.pollSeconds)
        #expect(schedule.read(changes: ReadSchedule.streamKeys) == .none && schedule.interval == ReadSchedule.streamSeconds)
        #expect(schedule.read(changes: 500) == .none && schedule.interval == ReadSchedule.streamSeconds)
        #expect(schedule.read(changes: 3) == .none && schedule.interval == ReadSchedule.pollSeconds)
        // A woken reader reads soon after changes, however many: it is not under a stream yet.
        var quiet = settled()
        #expect(quiet.read(changes: 500) == .none && quiet.interval == ReadSchedule.pollSeconds)
        // Four busy reads make it poll; polling, the next read that finds a stream waits longer.
        _ = quiet.read(changes: 500)
        _ = quiet.read(changes: 500)
        #expect(quiet.read(changes: 500) == .releaseQuietLock && quiet.mode == .polling)
        #expect(quiet.read(changes: 500) == .none && quiet.interval == ReadSchedule.streamSeconds)
    }

    /// A read due in a fraction of a millisecond waits a whole one, not zero (a spin of
    /// zero-length polls until it is due); past reads wait nothing; none waits over 500 ms.
    @Test func theWaitForAReadIsRoundedUp() {
        #expect(ReadSchedule.pollMilliseconds(0.0003) == 1)
        #expect(ReadSchedule.pollMilliseconds(0.0047) == 5)
        #expect(ReadSchedule.pollMilliseconds(0.005) == 5)
        #expect(ReadSchedule.pollMilliseconds(0) == 0)
        #expect(ReadSchedule.pollMilliseconds(-2) == 0)
        #expect(ReadSchedule.pollMilliseconds(3600) == 500)
    }
}
