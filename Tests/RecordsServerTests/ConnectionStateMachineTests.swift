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

    @Test func aBalancersFirstLineIsItsProxyHeaderThenLinesRun() {
        var machine = ConnectionStateMachine(highWater: highWater, awaitsProxyHeader: true)
        #expect(machine.takesLine(pendingOutput: 0, importPaused: false))
        // Whatever comes first is taken as the header, a line too long included ...
        #expect(machine.route(.tooLong(length: 300)) == .proxyHeader(.tooLong(length: 300)))
        // ... and only the first.
        #expect(machine.route(.line("PROXY TCP4 10.0.0.1 10.0.0.2 1 2")) == .run("PROXY TCP4 10.0.0.1 10.0.0.2 1 2"))
        // A connection not from a balancer runs its first line.
        var direct = ConnectionStateMachine(highWater: highWater)
        #expect(direct.route(.line("PING")) == .run("PING"))
        // Closed while waiting for the header (shutdown, idle), it is not read.
        var waiting = ConnectionStateMachine(highWater: highWater, awaitsProxyHeader: true)
        waiting.closeWhenIdle()
        #expect(waiting.isClosing)
    }

    @Test func quitKeepsNothingToResumeAndCloseDoes() {
        var quit = ConnectionStateMachine(highWater: highWater)
        quit.stepped(.quit)
        #expect(quit.isClosing && quit.quit)
        // A balancer's bad header closes the connection; its session may still be resumed.
        var refused = ConnectionStateMachine(highWater: highWater)
        refused.stepped(.close)
        #expect(refused.isClosing && !refused.quit)
        // An operator's end waits for the running step, then closes as QUIT.
        var ended = ConnectionStateMachine(highWater: highWater)
        ended.stepped(.database)
        ended.quitWhenIdle()
        #expect(ended.isBusy && ended.quit)
        ended.databaseFinished(stopping: false)
        #expect(ended.closesNow(pendingOutput: 0, budgetSpent: false))
    }

    @Test func stoppingHandsEachSessionOffOnceBetweenSteps() {
        var machine = ConnectionStateMachine(highWater: highWater)
        #expect(!machine.handsOffNow(stopping: false, importing: false))
        // Not while a step runs, nor while an IMPORT still takes its lines.
        machine.stepped(.database)
        #expect(!machine.handsOffNow(stopping: true, importing: false))
        #expect(machine.handsOffAfterStep(stopping: true))
        machine.databaseFinished(stopping: false)
        #expect(!machine.handsOffNow(stopping: true, importing: true))
        #expect(machine.handsOffNow(stopping: true, importing: false))
        // Once.
        let first = machine.farewell()
        let second = machine.farewell()
        #expect(first && !second)
        #expect(!machine.handsOffNow(stopping: true, importing: false))
        #expect(!machine.handsOffAfterStep(stopping: true))
        // A session already closing (QUIT) is let close.
        var quitting = ConnectionStateMachine(highWater: highWater)
        quitting.stepped(.quit)
        #expect(!quitting.handsOffNow(stopping: true, importing: false))
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
