import Testing
@testable import Records

/// What a WATCH's identity is told on a table with policies, judged by the ledger against what
/// PostgreSQL says it sees when each delivery is checked (scripted here).
@Suite struct VisibilityLedgerTests {
    /// One delivery of `events` (operation, key) to one session, the keys in `visible` being
    /// what the identity sees when it is checked; the lines told.
    /// `bound`: PostgreSQL's answer to whether the policies bind the identity (nil: the
    /// question fails). `lookups` counts the visibility queries.
    private func deliver(_ ledger: VisibilityLedger, _ events: [(String, String)], visible: Set<String>,
                         bound: Bool? = true, lookups: UnsafeMutablePointer<Int>? = nil) -> [String] {
        let batch = VisibilityLedger.Batch(events: events.map { ChangeFeed.Event(entity: "employee", operation: ChangeOperation(rawValue: $0.0)!, ids: [$0.1]) },
                                           all: [1], filtered: [])
        _ = ledger.enqueue(batch)
        var lines: [String] = []
        let policies = QueryBuilder.policiesBind(SampleModel.model.entity(named: "employee")!, model: SampleModel.model).sql
        ledger.drain(model: SampleModel.model, query: { sql, parameters in
            if sql == policies {
                guard let bound else { throw CancellationError() }
                return [[String(bound)]]
            }
            lookups?.pointee += 1
            return SQL.parseArray(parameters.first.flatMap { $0 } ?? "{}").compactMap { $0 }.filter { visible.contains($0) }.map { [$0] }
        }, emit: { lines += $0.lines })
        return lines
    }

    private func ledger() -> VisibilityLedger {
        VisibilityLedger(identity: Identity(user: "alice", role: "writer"), entity: "employee", seed: WatchSeed(keys: [], complete: true))
    }

    /// Inserted, updated and deleted in quick succession, read in three deliveries: by the
    /// time the update is checked the row is gone. The session was told of the insert, so it
    /// must be told of the delete, or it keeps a record that no longer exists (it was not).
    @Test func aRecordToldOfIsToldGoneWhenItsRowWentBeforeALaterCheck() {
        let ledger = ledger()
        #expect(deliver(ledger, [("inserted", "7")], visible: ["7"]) == ["employee 7 inserted"])
        #expect(deliver(ledger, [("updated", "7")], visible: []) == [])
        #expect(deliver(ledger, [("deleted", "7")], visible: []) == ["employee 7 deleted"])
    }

    /// The same within one delivery, and a record never seen is never told of.
    @Test func oneDeliveryAndRecordsNeverSeen() {
        let ledger = ledger()
        #expect(deliver(ledger, [("inserted", "8"), ("updated", "8"), ("deleted", "8")], visible: []) == [])
        #expect(deliver(ledger, [("inserted", "9"), ("inserted", "10")], visible: ["10"]) == ["employee 10 inserted"])
        #expect(deliver(ledger, [("updated", "10"), ("deleted", "9"), ("deleted", "10")], visible: []) == ["employee 10 deleted"])
    }

    /// Policies that do not bind the identity (a superuser, BYPASSRLS, an owner without FORCE):
    /// every change is told, deletes of records never seen included, and no key is looked up.
    /// Once they bind again, what was told is remembered: its delete is told, a stranger's not.
    @Test func policiesThatDoNotBindTellEverythingWithoutLookingUp() {
        let ledger = ledger()
        var lookups = 0
        #expect(deliver(ledger, [("inserted", "1"), ("updated", "1"), ("deleted", "2")], visible: [], bound: false, lookups: &lookups)
                    == ["employee 1 inserted", "employee 1 updated", "employee 2 deleted"])
        #expect(lookups == 0)
        #expect(deliver(ledger, [("deleted", "1"), ("deleted", "3")], visible: [], bound: true, lookups: &lookups) == ["employee 1 deleted"])
        // A question that fails is taken as binding: the keys are looked up.
        #expect(deliver(ledger, [("inserted", "4"), ("inserted", "5")], visible: ["5"], bound: nil, lookups: &lookups) == ["employee 5 inserted"])
        #expect(lookups == 2)
    }
}
