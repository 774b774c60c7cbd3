import Postgres

/// SAVEs of several sessions run as one transaction in one round trip: group commit. Under
/// load, one-round saves (inserts and updates whose keys are known, no deletes, no SAVE KEY)
/// queue for a connection; a worker takes those waiting with the same identity and sends
/// BEGIN, the timeouts, each save's writes and commit mark, then one COMMIT. Each unit still
/// commits whole or not at all, and PostgreSQL pays one commit (and one wake-up of the
/// watching servers) for the lot.
///
/// Saves whose writes are all joinable inserts of the same statements (the same tables and
/// columns: a busy form's saves, an ingest's) go further: each statement is sent once with
/// their rows joined, and their commit marks in one insert, so PostgreSQL runs two statements
/// and its statement triggers (WATCH's log) fire once for the lot.
///
/// Should any statement fail, the transaction is rolled back and each save runs alone, from
/// the plan it had before the group started it, so that its reply is what it would have been
/// without the others. A connection lost on the way leaves each save's outcome to its own
/// commit mark, as for a save alone.
struct SaveGroup: Sendable {
    /// At most this many saves a transaction: a failure reruns them all one by one.
    static let maxMembers = 32
    /// A save of more rows than this keeps its own statements (it is a bulk write already),
    /// so a joined statement holds at most 32,000 rows, within `WritePlan.defaultRowsPerStatement`.
    static let joinedRowsLimit = 1_000

    struct Member: Sendable {
        /// Where the save came in the list given.
        var index: Int
        /// The plan started for the group, and as it was before (to run alone).
        var plan: SavePlan
        var unstarted: SavePlan
        /// Where its writes and commit mark went among the group's statements (shared with
        /// the saves its statements were joined with).
        var statements: Range<Int>
        /// Its own round's shape: what opened its transaction, where each of its writes and
        /// its mark got its result, and its statement count with COMMIT.
        var prologue: Int
        var results: [Source]
        var count: Int
        /// Its own first round, should it go alone after all.
        var first: SavePlan.Action
    }

    /// Where a member's statement got its result.
    enum Source: Sendable, Equatable {
        /// The group's statement at this index was its own.
        case own(Int)
        /// It was joined with others': it wrote its own rows, as sent.
        case joined(rows: Int)
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

    /// The commit marks of joined saves, in one statement.
    static func marks(_ nonces: [String?]) -> Statement {
        Statement("INSERT INTO records.save_marks (xid, nonce) SELECT pg_current_xact_id(), unnest($1::bigint[])", [SQL.arrayLiteral(nonces)])
    }

    /// A plan that may join: started, committing in its first round.
    private struct Candidate {
        var index: Int
        var own: [Statement]
        var writes: Int
        var first: SavePlan.Action
        var joinable: [Int]?
    }

    /// Where a candidate's statements went in the group's round trip, and where its results are.
    private typealias Shape = (statements: Range<Int>, results: [Source])

    /// Starts each plan. Those that commit in their first round with the same opening
    /// statements as the first such one become members; the rest are alone. With fewer than
    /// two members there is no group: each goes alone.
    init(_ plans: [SavePlan]) {
        // A candidate's plans (started, and as given) wait in `started` and `given` at its
        // position and are moved into its member at the end: a plan is some thirty references,
        // and a group of 32 copied them over and over.
        var prologue: [Statement]?
        var candidates: [Candidate] = []
        var started: [SavePlan?] = []
        var given: [SavePlan?] = []
        for index in plans.indices {
            var plan = plans[index]
            let action = plan.start()
            guard case .run(let own) = action, let writes = plan.writesInFirstRound, candidates.count < Self.maxMembers,
                  own.last == .commit, prologue == nil || own[..<writes].elementsEqual(prologue!) else {
                alone.append(Alone(index: index, plan: plan, action: action))
                continue
            }
            if prologue == nil { prologue = Array(own[..<writes]) }
            let joinable = plan.joinableInsertRows.flatMap { $0.reduce(0, +) <= Self.joinedRowsLimit ? $0 : nil }
            candidates.append(Candidate(index: index, own: own, writes: writes, first: action, joinable: joinable))
            started.append(plan)
            given.append(plans[index])
        }
        guard candidates.count > 1, let prologue else {
            for position in candidates.indices {
                alone.append(Alone(index: candidates[position].index, plan: started[position].take()!, action: candidates[position].first))
            }
            alone.sort { $0.index < $1.index }
            return
        }
        statements = prologue
        var shapes = joinInserts(candidates)
        for position in candidates.indices where shapes[position] == nil {
            let start = statements.count
            let own = candidates[position].own
            statements += own[candidates[position].writes..<(own.count - 1)]
            shapes[position] = (start..<statements.count, (start..<statements.count).map { .own($0) })
        }
        members.reserveCapacity(candidates.count)
        for position in candidates.indices {
            let candidate = candidates[position], shape = shapes[position]!
            members.append(Member(index: candidate.index, plan: started[position].take()!, unstarted: given[position].take()!,
                                  statements: shape.statements, prologue: candidate.writes, results: shape.results,
                                  count: candidate.own.count, first: candidate.first))
        }
        statements.append(.commit)
    }

    /// Saves of joinable inserts with the same statements' text (two or more) become one
    /// statement each, their arrays joined, and one statement of their commit marks; the
    /// shapes of the candidates joined so, nil for the others.
    private mutating func joinInserts(_ candidates: [Candidate]) -> [Shape?] {
        // By the text of their statements, in the order first seen.
        var classes: [[String]: [Int]] = [:]
        var order: [[String]] = []
        for position in candidates.indices where candidates[position].joinable != nil {
            let own = candidates[position].own
            let texts = own[candidates[position].writes..<(own.count - 2)].map { $0.sql }
            if classes[texts] == nil { order.append(texts) }
            classes[texts, default: []].append(position)
        }
        var shapes = [Shape?](repeating: nil, count: candidates.count)
        for texts in order {
            guard let positions = classes[texts], positions.count > 1 else { continue }
            let start = statements.count
            for (offset, text) in texts.enumerated() {
                let parameters = candidates[positions[0]].own[candidates[positions[0]].writes + offset].parameters
                let joined = parameters.indices.map { column in
                    SQL.arrayLiteral(positions.flatMap { position in
                        SQL.parseArray(candidates[position].own[candidates[position].writes + offset].parameters[column] ?? "{}")
                    })
                }
                statements.append(Statement(text, joined))
            }
            statements.append(Self.marks(positions.map { position in
                let own = candidates[position].own
                return own[own.count - 2].parameters.first ?? nil
            }))
            for position in positions {
                let rows = candidates[position].joinable!.map { Source.joined(rows: $0) }
                shapes[position] = (start..<statements.count, rows + [.joined(rows: 0)])
            }
        }
        return shapes
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
                // Its own round's results: nothing is read from the opening statements or COMMIT.
                // (Read in place: a copy of the member is two plans' worth of references.)
                let writes = members[index].results.map { source -> StatementResult in
                    switch source {
                    case .own(let at): results[at]
                    case .joined(let rows): StatementResult(affected: rows)
                    }
                }
                let own = Array(repeating: StatementResult(), count: members[index].prologue) + writes + [StatementResult()]
                actions.append(members[index].plan.received(.success(own)))
            }
            return .each(actions)
        case .failure(_, let error):
            guard error.kind == .connection else { return .runAlone }
            // Whether COMMIT happened is for each save's mark to say: each is told the
            // connection went while its COMMIT was in flight.
            var actions: [SavePlan.Action] = []
            for index in members.indices {
                actions.append(members[index].plan.received(.failure(index: members[index].count - 1, error: error)))
            }
            return .each(actions)
        }
    }
}
