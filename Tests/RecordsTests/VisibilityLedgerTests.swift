import Testing
@testable import Records

/// What a WATCH's identity is told on a table with policies, judged by the ledger against what
/// PostgreSQL says it sees when each delivery is checked (scripted here).
@Suite struct VisibilityLedgerTests {
    /// One delivery of `events` (operation, key) to one session, the keys in `visible` being
    /// what the identity sees when it is checked; the lines told.
    private func deliver(_ ledger: VisibilityLedger, _ events: [(String, String)], visible: Set<String>) -> [String] {
        let batch = VisibilityLedger.Batch(events: events.map { ChangeFeed.Event(entity: "employee", operation: $0.0, ids: [$0.1]) },
                                           all: [1], filtered: [])
        _ = ledger.enqueue(batch)
        var lines: [String] = []
        ledger.drain(model: SampleModel.model, query: { _, parameters in
            SQL.parseArray(parameters.first.flatMap { $0 } ?? "{}").compactMap { $0 }.filter { visible.contains($0) }.map { [$0] }
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
}
