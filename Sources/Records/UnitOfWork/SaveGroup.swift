import Postgres

/// SAVEs of several sessions run as one transaction in one round trip: group commit. Under
/// load, one-round saves (inserts and updates whose keys are known, no deletes, no SAVE KEY)
/// queue for a connection; a worker takes those waiting with the same identity and sends
/// BEGIN, the timeouts, each save's writes and commit mark, then one COMMIT. Each unit still
/// commits whole or not at all, and PostgreSQL pays one commit (and one wake-up of the
/// watching servers) for the lot.
///
/// Should any statement fail, the transaction is rolled back and each save runs alone, from
/// the plan it had before the group started it, so that its reply is what it would have been
/// without the others. A connection lost on the way leaves each save's outcome to its own
/// commit mark, as for a save alone.
struct SaveGroup: Sendable {
    /// At most this many saves a transaction: a failure reruns them all one by one.
    static let maxMembers = 32

    struct Member: Sendable {
        /// Where the save came in the list given.
        var index: Int
        /// The plan started for the group, and as it was before (to run alone).
        var plan: SavePlan
        var unstarted: SavePlan
        /// Where its writes and commit mark are among the group's statements.
        var statements: Range<Int>
        /// Its own rounds' shape: what opened its transaction, and its statement count with COMMIT.
        var prologue: Int
        var count: Int
        /// Its own first round, should it go alone after all.
        var first: SavePlan.Action
    }

    /// A save that cannot share the transaction: its first action, for it to go on alone.
    struct Alone: Sendable {
        var index: Int
        var plan: SavePlan
        var action: SavePlan.Action
    }

    private(set) var members: [Member] = []
    private(set) var alone: [Alone] = []
    /// The round trip to send: empty when fewer than two saves could share it.
    private(set) var statements: [Statement] = []

    /// Starts each plan. Those that commit in their first round with the same opening
    /// statements as the first such one become members; the rest are alone. With fewer than
    /// two members there is no group: each goes alone.
    init(_ plans: [SavePlan]) {
        var prologue: [Statement]?
        for (index, unstarted) in plans.enumerated() {
            var plan = unstarted
            let action = plan.start()
            guard case .run(let own) = action, let writes = plan.writesInFirstRound, members.count < Self.maxMembers,
                  own.last == .commit, prologue == nil || Array(own[..<writes]) == prologue else {
                alone.append(Alone(index: index, plan: plan, action: action))
                continue
            }
            if prologue == nil {
                prologue = Array(own[..<writes])
                statements = prologue!
            }
            let start = statements.count
            statements += own[writes..<(own.count - 1)]
            members.append(Member(index: index, plan: plan, unstarted: unstarted, statements: start..<statements.count,
                                  prologue: writes, count: own.count, first: action))
        }
        guard members.count > 1 else {
            alone = (alone + members.map { Alone(index: $0.index, plan: $0.plan, action: $0.first) }).sorted { $0.index < $1.index }
            members = []
            statements = []
            return
        }
        statements.append(.commit)
    }

    /// What the group's round trip says to each member.
    enum Outcome: Sendable {
        /// Each member's next action, in `members`' order (committed, or uncertain: the
        /// connection was lost).
        case each([SavePlan.Action])
        /// A statement failed and the transaction is rolled back: each member runs alone.
        case runAlone
    }

    mutating func received(_ round: RoundResult) -> Outcome {
        switch round {
        case .success(let results):
            var actions: [SavePlan.Action] = []
            for index in members.indices {
                let member = members[index]
                // Its own round's results: nothing is read from the opening statements or COMMIT.
                let own = Array(repeating: StatementResult(), count: member.prologue) + results[member.statements] + [StatementResult()]
                actions.append(members[index].plan.received(.success(own)))
            }
            return .each(actions)
        case .failure(let failed, let error):
            guard error.kind == .connection else { return .runAlone }
            // Whether COMMIT happened is for each save's mark to say: each is told the
            // connection went at its own place, or at its COMMIT when it failed elsewhere.
            var actions: [SavePlan.Action] = []
            for index in members.indices {
                let member = members[index]
                let own = member.statements.contains(failed) ? member.prologue + failed - member.statements.lowerBound
                    : failed < member.prologue ? failed : member.count - 1
                actions.append(members[index].plan.received(.failure(index: own, error: error)))
            }
            return .each(actions)
        }
    }
}
