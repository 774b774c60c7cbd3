import Testing
import Records
@testable import RecordsServer

/// The connection's decisions, without a socket.
@Suite struct ConnectionStateMachineTests {
    let highWater = 1000

    @Test func linesAreTakenWhileReadingAndBelowTheHighWaterMark() {
        let machine = ConnectionStateMachine(highWater: highWater)
        #expect(machine.takesLine(pendingOutput: 0, importPaused: false))
        #expect(!machine.takesLine(pendingOutput: highWater, importPaused: false))
    }

    @Test func aDatabaseStepHoldsTheNextLineUntilItsReplyIsBack() {
        var machine = ConnectionStateMachine(highWater: highWater)
        #expect(machine.route(.line("GET employee 1")) == .run("GET employee 1"))
        machine.stepped(.database)
        #expect(machine.isBusy)
        #expect(!machine.takesLine(pendingOutput: 0, importPaused: false))
        // Replies before it wait to leave with its own ...
        #expect(!machine.shouldFlush(pendingOutput: 10))
        // ... unless they pile up, or the step turns out slow.
        #expect(machine.shouldFlush(pendingOutput: highWater / 2))
        machine.stepIsSlow()
        #expect(machine.shouldFlush(pendingOutput: 10))
        machine.databaseFinished(stopping: false)
        #expect(machine.state == .reading)
        #expect(!machine.flushHeld)
    }

    @Test func aRefusedImportsDataIsDroppedUpToItsDot() {
        var machine = ConnectionStateMachine(highWater: highWater)
        machine.stepped(.skipData)
        #expect(machine.route(.line("1,Ann")) == .drop)
        #expect(machine.route(.line("SAVE")) == .drop)
        #expect(machine.route(.line(".")) == .drop)
        #expect(machine.route(.line("PING")) == .run("PING"))
    }

    @Test func anImportGathersItsLinesThenAwaitsItsCopy() {
        var machine = ConnectionStateMachine(highWater: highWater)
        machine.stepped(.collect)
        #expect(machine.route(.line("1,Ann")) == .gather(.line("1,Ann")))
        #expect(machine.route(.tooLong(length: 5000)) == .gather(.tooLong(length: 5000)))
        // Reading stops while the COPY has not caught up.
        #expect(!machine.takesLine(pendingOutput: 0, importPaused: true))
        machine.importEnded(answered: false)
        #expect(machine.isBusy)
        machine.databaseFinished(stopping: false)
        #expect(machine.state == .reading)
        // An import answered before its `.` (a bad header) goes straight back to reading.
        machine.stepped(.collect)
        machine.importEnded(answered: true)
        #expect(machine.state == .reading)
    }

    @Test func quitAnswersWhatIsBufferedThenCloses() {
        var machine = ConnectionStateMachine(highWater: highWater)
        machine.stepped(.close)
        #expect(!machine.takesLine(pendingOutput: 0, importPaused: false))
        #expect(!machine.closesNow(pendingOutput: 5, budgetSpent: false))
        #expect(machine.closesNow(pendingOutput: 0, budgetSpent: false))
    }

    @Test func aPeerThatClosedIsAnsweredFirst() {
        var machine = ConnectionStateMachine(highWater: highWater)
        machine.peerDidClose()
        // Lines are left (the budget ran out): they are answered first.
        #expect(!machine.closesNow(pendingOutput: 0, budgetSpent: true))
        #expect(machine.continuesNextTurn(budgetSpent: true))
        #expect(machine.closesNow(pendingOutput: 0, budgetSpent: false))
        // Nothing more is read from it.
        #expect(machine.interest(pendingOutput: 0, bufferedBytes: 0, importPaused: false) == nil)
    }

    @Test func shutdownClosesIdleSessionsAndBusyOnesAfterTheirReply() {
        var idle = ConnectionStateMachine(highWater: highWater)
        idle.closeWhenIdle()
        #expect(idle.isClosing)
        var busy = ConnectionStateMachine(highWater: highWater)
        busy.stepped(.database)
        busy.closeWhenIdle()
        #expect(busy.isBusy)
        #expect(!busy.closesNow(pendingOutput: 0, budgetSpent: false))
        busy.databaseFinished(stopping: true)
        #expect(busy.closesNow(pendingOutput: 0, budgetSpent: false))
    }

    @Test func interestFollowsWhatTheConnectionWaitsFor() {
        var machine = ConnectionStateMachine(highWater: highWater)
        #expect(machine.interest(pendingOutput: 0, bufferedBytes: 0, importPaused: false) == Readiness.readable)
        // Unchanged: nothing to tell epoll.
        #expect(machine.interest(pendingOutput: 0, bufferedBytes: 0, importPaused: false) == nil)
        // Output waiting: writable too.
        #expect(machine.interest(pendingOutput: 10, bufferedBytes: 0, importPaused: false) == Readiness.readable | Readiness.writable)
        // Past the high-water mark: not read (backpressure) until it drains.
        #expect(machine.interest(pendingOutput: highWater, bufferedBytes: 0, importPaused: false) == Readiness.writable)
        _ = machine.interest(pendingOutput: 0, bufferedBytes: 0, importPaused: false)
        // A running step keeps the read interest while nothing is buffered ...
        machine.stepped(.database)
        #expect(machine.interest(pendingOutput: 0, bufferedBytes: 0, importPaused: false) == nil)
        // ... and drops it once the peer sent more than the session has taken.
        #expect(machine.interest(pendingOutput: 0, bufferedBytes: 20, importPaused: false) == 0)
        // A transport mid-handshake gets what it needs whatever the session wants.
        #expect(machine.interest(pendingOutput: 0, bufferedBytes: 20, importPaused: false, transportWantsRead: true) == Readiness.readable)
    }

    /// The banner waits in the output of a TLS connection whose client never begins its
    /// handshake: the write waits for the peer, so only readability is asked for. Asking for
    /// writability too (always true of a socket) spun the loop at 100% of a core with 1,000
    /// such connections open, and every other client's PING went from 0.07 to 4 ms.
    @Test func outputBehindAHandshakeWaitsForThePeerNotForWritability() {
        var machine = ConnectionStateMachine(highWater: highWater)
        #expect(machine.interest(pendingOutput: 80, bufferedBytes: 0, importPaused: false, transportWantsRead: true) == Readiness.readable)
        // The handshake done, the output goes out when the socket takes it.
        #expect(machine.interest(pendingOutput: 80, bufferedBytes: 0, importPaused: false) == Readiness.readable | Readiness.writable)
    }

    @Test func aClosedConnectionDoesNothingMore() {
        var machine = ConnectionStateMachine(highWater: highWater)
        machine.didClose()
        machine.stepped(.database)
        #expect(machine.isClosed)
        #expect(!machine.takesLine(pendingOutput: 0, importPaused: false))
        #expect(!machine.closesNow(pendingOutput: 0, budgetSpent: false))
        #expect(!machine.continuesNextTurn(budgetSpent: true))
        #expect(machine.interest(pendingOutput: 0, bufferedBytes: 0, importPaused: false) == nil)
    }
}
