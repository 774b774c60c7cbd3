import Foundation
import Postgres
import Testing
@testable import Records

/// Sequence values taken ahead of SAVEs (`KeyReserve`), against a real sequence.
@Suite struct KeyReserveTests {
    /// A SAVE that moves a sequence past keys its client gave drops the values held for it.
    /// Values another worker was fetching at that moment came from before the move and may be
    /// those very keys: they must not be kept. The drop is made after PostgreSQL has handed
    /// out the values and before they reach the reserve (in `meanwhile`, once the sequence
    /// shows them taken).
    @Test func valuesFetchedAcrossADropAreNotKept() throws {
        let url = try TestEnvironment.freshDatabase()
        let fetching = try Connection(url), other = try Connection(url)
        try other.execute("CREATE SEQUENCE kr_seq")
        let reserve = KeyReserve()
        var droppedAt: String?
        let first = try reserve.take([("kr_seq", 1)], role: "r", on: fetching) {
            for _ in 0..<500 {
                if let last = try? other.query("SELECT last_value FROM kr_seq").string(0, 0), Int(last) ?? 0 > KeyReserve.ahead {
                    droppedAt = last
                    break
                }
                usleep(10_000)
            }
            // A client gave keys 2 to 1000 and its SAVE moved the sequence past them.
            _ = try? other.query("SELECT setval('kr_seq', 1000)")
            reserve.drop("kr_seq")
        }
        #expect(first == ["kr_seq": ["1"]])
        #expect(droppedAt == String(1 + KeyReserve.ahead), "the values were not all taken before the drop")
        let next = try reserve.take([("kr_seq", 1)], role: "r", on: fetching)
        #expect(next == ["kr_seq": ["1001"]], "a value from before the move was handed out")
    }

    /// Reloading the model (`dropAll`) while values are fetched leaves them unused too.
    @Test func valuesFetchedAcrossAReloadAreNotKept() throws {
        let url = try TestEnvironment.freshDatabase()
        let fetching = try Connection(url), other = try Connection(url)
        try other.execute("CREATE SEQUENCE kr_seq")
        let reserve = KeyReserve()
        _ = try reserve.take([("kr_seq", 1)], role: "r", on: fetching) {
            for _ in 0..<500 {
                if let last = try? other.query("SELECT last_value FROM kr_seq").string(0, 0), Int(last) ?? 0 > KeyReserve.ahead { break }
                usleep(10_000)
            }
            reserve.dropAll()
        }
        #expect(try reserve.take([("kr_seq", 1)], role: "r", on: fetching) == ["kr_seq": [String(2 + KeyReserve.ahead)]])
        // Without a drop, the values fetched ahead are kept and handed out in order.
        #expect(try reserve.take([("kr_seq", 2)], role: "r", on: fetching) == ["kr_seq": [String(3 + KeyReserve.ahead), String(4 + KeyReserve.ahead)]])
    }
}
