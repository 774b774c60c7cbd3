import Testing
@testable import RecordsServer

/// A session's share of a turn of the loop: lines, and time.
@Suite struct TurnBudgetTests {
    @Test func cheapLinesEndTheTurnAtTheLineCount() {
        var budget = TurnBudget(start: 1_000)
        for line in 1...TurnBudget.lines {
            #expect(!budget.spent, "line \(line)")
            budget.spend(now: 1_000 + UInt64(line))
        }
        #expect(budget.spent)
    }

    @Test func theLineThatPassesTheTimeEndsTheTurn() {
        var budget = TurnBudget(start: 1_000)
        budget.spend(now: 1_000 + TurnBudget.nanoseconds - 1)
        #expect(!budget.spent)
        budget.spend(now: 1_000 + TurnBudget.nanoseconds)
        #expect(budget.spent)
        // One costly line alone spends the turn.
        var costly = TurnBudget(start: 0)
        costly.spend(now: 50_000_000)
        #expect(costly.spent)
    }
}
