import RecordsProtocol
import Testing

/// The pushed lines come from one table: what the server writes, the client reads back as the
/// same kind (a client that missed one would take a shutdown for a change event).
@Suite struct NoticeTests {
    static let every: [Notice] = [.overflow(dropped: 12), .signedOut("user ann no longer exists"), .shutdown(lost: nil),
                                  .shutdown(lost: 3), .handOff(token: "h7Qx-2", pending: 4, ttl: 600), .durableFailed,
                                  .idle(seconds: 30), .signInTimeout(seconds: 30), .ended]

    @Test func eachLineReadsBackAsItsKind() {
        for notice in Self.every {
            #expect(notice.text.hasPrefix(notice.kind + " ") || notice.text == notice.kind, "\(notice)")
            let expected: Notice.Kind = switch notice {
            case .overflow: .event
            case .handOff(let token, _, _): .handOff(token: token)
            case .durableFailed: .warning
            case .signedOut, .shutdown, .idle, .signInTimeout, .ended: .sessionEnds
            }
            #expect(Notice.kind(of: notice.text) == expected, "\(notice.text)")
        }
        #expect(Notice.kind(of: "change employee 7 update") == .event)
    }

    @Test func theLinesAreTheOnesClientsAlreadyRead() {
        #expect(Notice.shutdown(lost: nil).text == "shutdown recordsd is stopping")
        #expect(Notice.handOff(token: "abc", pending: 2, ttl: 300).text == "handoff abc (2 pending change(s)): RESUME abc on any server within 300 s restores this session")
        #expect(Notice.overflow(dropped: 120).text == "overflow 120 events dropped")
        #expect(Notice.idle(seconds: 5).text == "idle session closed after 5s without a request")
    }
}
