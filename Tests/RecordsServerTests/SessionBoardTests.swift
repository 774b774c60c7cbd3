import Foundation
@testable import RecordsServer
import Testing

/// The operators' board, without a server: what the loop publishes is what /sessions lists, an
/// end reaches the loop only for a session it has, and the JSON says running or idle.
@Suite struct SessionBoardTests {
    static func entry(_ id: Int, running: Bool = false, started: UInt64 = 0) -> SessionBoard.Entry {
        SessionBoard.Entry(id: id, user: id == 1 ? "ann" : nil, address: "127.0.0.1", tls: id == 1,
                           connectedAt: Date(timeIntervalSince1970: 1_780_000_000), pending: id, verb: "INSERT",
                           running: running, commandStarted: started, bytesIn: 10 * id, bytesOut: 20 * id, watching: 0)
    }

    @Test func listsWhatWasPublishedAndEndsOnlyWhatIsThere() {
        let board = SessionBoard()
        let ended = LockedIDs()
        board.setEnder { ended.add($0) }
        board.publish(Self.entry(2))
        board.publish(Self.entry(1))
        #expect(board.list().map(\.id) == [1, 2])
        board.publish(Self.entry(2, running: true))
        #expect(board.list().last?.running == true)
        #expect(board.end(2) && !board.end(7))
        board.remove(2)
        #expect(!board.end(2))
        #expect(ended.ids == [2])
    }

    @Test func theJSONSaysRunningForOrIdleSince() throws {
        let board = SessionBoard()
        board.publish(Self.entry(1, running: true, started: 1_000_000_000))
        board.publish(Self.entry(2, running: false, started: 2_000_000_000))
        let rows = try #require(try JSONSerialization.jsonObject(with: Data(board.json(now: 3_500_000_000).utf8)) as? [[String: Any]])
        #expect(rows.count == 2)
        #expect(rows[0]["state"] as? String == "running" && rows[0]["running_ms"] as? Int == 2500 && rows[0]["user"] as? String == "ann")
        #expect(rows[1]["state"] as? String == "idle" && rows[1]["idle_ms"] as? Int == 1500 && rows[1]["user"] is NSNull)
        #expect(rows[0]["connected_at"] as? String == "2026-05-28T20:26:40.000Z" && rows[1]["bytes_out"] as? Int == 40)
    }
}

final class LockedIDs: @unchecked Sendable {  // `stored` guarded by `lock`
    private let lock = NSLock()
    private var stored: [Int] = []
    func add(_ id: Int) { lock.withLock { stored.append(id) } }
    var ids: [Int] { lock.withLock { stored } }
}
