/// What one session may take of a turn of the loop before the others are served: a number of
/// lines (a deep pipeline of cheap lines) and a time (a few lines that each cost the loop much,
/// as a refused DELETE or an `UPDATE ... WHERE` in a unit of 100,000 pending inserts). The
/// line that passes the time ends the turn; the rest waits for the next.
struct TurnBudget {
    static let lines = 256
    static let nanoseconds: UInt64 = 2_000_000

    private var linesLeft = TurnBudget.lines
    private let deadline: UInt64

    init(start: UInt64) { deadline = start &+ Self.nanoseconds }

    /// A line was run; `now` is the loop's clock after it.
    mutating func spend(now: UInt64) {
        linesLeft -= 1
        if now >= deadline { linesLeft = 0 }
    }

    var spent: Bool { linesLeft <= 0 }
}
