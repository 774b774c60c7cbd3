import Testing
@testable import Records

/// Which watchers get which events, and which WHERE queries run: without PostgreSQL.
@Suite struct WatchFanOutTests {
    let model = SampleModel.model
    let events = [ChangeFeed.Event(entity: "department", operation: .inserted, ids: ["1", "2"]),
                  ChangeFeed.Event(entity: "project", operation: .deleted, ids: ["7"])]
    let ann = Identity(user: "ann", role: "writer")
    let bob = Identity(user: "bob", role: "writer")

    func predicate(_ text: String) throws -> Predicate {
        guard case .find(let request) = try CommandParser.parse("FIND department WHERE " + text), let predicate = request.predicate else {
            throw CommandError(.syntax, "no predicate")
        }
        return predicate
    }

    @Test func aWatchWithoutWhereGetsTheSharedLinesOfItsEntitysEvents() {
        let plan = WatchFanOut(events: events, guarded: [false, false], model: model, maxChecks: 10, watchers: [
            .init(id: 1, identity: ann, watches: ["department": Predicate?.none]),
            .init(id: 2, identity: ann, watches: ["project": Predicate?.none, "department": Predicate?.none]),
            .init(id: 3, identity: ann, watches: ["tag": Predicate?.none]),
        ])
        #expect(plan.lines == [[0], [0, 1], []])
        #expect(plan.missed == [0, 0, 0])
        #expect(plan.checks.isEmpty)
    }

    @Test func oneQueryPerEventPredicateAndIdentityHoweverManyShareIt() throws {
        let rich = try predicate("number > 10"), poor = try predicate("number < 3")
        let plan = WatchFanOut(events: events, guarded: [false, false], model: model, maxChecks: 10, watchers: [
            .init(id: 1, identity: ann, watches: ["department": rich]),
            .init(id: 2, identity: ann, watches: ["department": rich]),
            .init(id: 3, identity: bob, watches: ["department": rich]),
            .init(id: 4, identity: ann, watches: ["department": poor]),
        ])
        #expect(plan.checks.map(\.sessions) == [[1, 2], [3], [4]])
        #expect(plan.checks.allSatisfy { $0.filter.event == events[0] })
        #expect(plan.lines == [[], [], [], []])
    }

    @Test func pastTheLimitOfQueriesASessionIsToldWhatItMissed() throws {
        let plan = WatchFanOut(events: events, guarded: [false, false], model: model, maxChecks: 1, watchers: [
            .init(id: 1, identity: ann, watches: ["department": try predicate("number > 10")]),
            .init(id: 2, identity: ann, watches: ["department": try predicate("number > 10")]),
            .init(id: 3, identity: ann, watches: ["department": try predicate("number > 20")]),
        ])
        #expect(plan.checks.map(\.sessions) == [[1, 2]])
        #expect(plan.missed == [0, 0, 1])
    }

    @Test func eventsUnderRowLevelSecurityAreTheLedgersNotThePlans() {
        let plan = WatchFanOut(events: events, guarded: [true, false], model: model, maxChecks: 10, watchers: [
            .init(id: 1, identity: ann, watches: ["department": Predicate?.none, "project": Predicate?.none]),
        ])
        #expect(plan.lines == [[1]])
    }

    @Test func eachIdentityAndEntityUnderRowLevelSecurityGetsOneLedgerBatch() throws {
        let rich = try predicate("number > 10")
        let batches = WatchFanOut.ledgerBatches(events: events, guarded: [true, false], watchers: [
            .init(id: 1, identity: ann, watches: ["department": Predicate?.none, "project": Predicate?.none]),
            .init(id: 2, identity: ann, watches: ["department": rich]),
            .init(id: 3, identity: ann, watches: ["department": rich]),
            .init(id: 4, identity: bob, watches: ["department": Predicate?.none]),
            .init(id: 5, identity: bob, watches: ["tag": Predicate?.none]),
        ])
        #expect(batches.map { "\($0.identity.user) \($0.entity)" } == ["ann department", "bob department"])
        #expect(batches[0].batch.events == [events[0]])
        #expect(batches[0].batch.all == [1])
        #expect(batches[0].batch.filtered.map(\.connections) == [[2, 3]])
        #expect(batches[1].batch.all == [4])
        #expect(batches[1].batch.filtered.isEmpty)
    }
}
