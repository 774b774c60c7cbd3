@testable import RecordsServer
import Testing

/// The PROXY protocol v1 header a trusted balancer sends first: the client's address, or
/// nothing for UNKNOWN; anything malformed is refused (the connection then closes).
@Suite struct ProxyHeaderTests {
    @Test func namesTheClient() {
        #expect(ProxyHeader.parse("PROXY TCP4 203.0.113.7 192.0.2.1 51234 7878") == .success(.client("203.0.113.7")))
        #expect(ProxyHeader.parse("PROXY TCP6 2001:db8::7 2001:db8::1 51234 7878") == .success(.client("2001:db8::7")))
        #expect(ProxyHeader.parse("PROXY TCP6 ::ffff:127.0.0.1 ::1 1 65535") == .success(.client("::ffff:127.0.0.1")))
        #expect(ProxyHeader.parse("PROXY UNKNOWN") == .success(.unknown))
        #expect(ProxyHeader.parse("PROXY UNKNOWN ffff:f...f:ffff ffff:f...f:ffff 65535 65535") == .success(.unknown))
    }

    @Test func refusesWhatIsNotAHeader() {
        let refused = [
            "PING", "", "PROXY", "proxy TCP4 1.2.3.4 5.6.7.8 1 2", "PROXY TCP4 1.2.3.4 5.6.7.8 1",
            "PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3", "PROXY TCP4  1.2.3.4 5.6.7.8 1 2", "PROXY UDP4 1.2.3.4 5.6.7.8 1 2",
            "PROXY TCP4 256.2.3.4 5.6.7.8 1 2", "PROXY TCP4 01.2.3.4 5.6.7.8 1 2", "PROXY TCP4 1.2.3 5.6.7.8 1 2",
            "PROXY TCP4 1.2.3.4 5.6.7.8 65536 2", "PROXY TCP4 1.2.3.4 5.6.7.8 01 2", "PROXY TCP4 1.2.3.4 5.6.7.8 -1 2",
            "PROXY TCP4 2001:db8::1 5.6.7.8 1 2", "PROXY TCP6 1.2.3.4 ::1 1 2", "PROXY TCP6 1:2:3:4:5:6:7:8:9 ::1 1 2",
            "PROXY TCP6 1::2::3 ::1 1 2", "PROXY TCP6 ::1\u{1F} ::1 1 2", "PROXY TCP4 ١.2.3.4 5.6.7.8 1 2",
            "PROXY TCP4 1.2.3.4 5.6.7.8 1 2" + String(repeating: " ", count: 100),
        ]
        for line in refused {
            guard case .failure = ProxyHeader.parse(line) else {
                Issue.record("taken: \(line.debugDescription)")
                continue
            }
        }
    }
}
