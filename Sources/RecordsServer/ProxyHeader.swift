#if canImport(Glibc)
import Glibc
#endif

/// The PROXY protocol's version 1 header (HAProxy's `send-proxy`): the first line a trusted
/// balancer sends on a connection, naming the client it carries. Behind a balancer every
/// client comes from the balancer's address; the header gives login throttling, the
/// loopback rule for AUTH and the logs the client's own. Pure: parsed without I/O.
///
///     PROXY TCP4 203.0.113.7 192.0.2.1 51234 7878
///     PROXY UNKNOWN
public enum ProxyHeader {
    /// The header's longest form (the specification's bound, CRLF included).
    static let maxLength = 107

    enum Parsed: Equatable {
        /// The client's address, as the header gives it.
        case client(String)
        /// `PROXY UNKNOWN`: the balancer's own connection (a health check); its address stands.
        case unknown
    }

    struct Invalid: Error, Equatable {
        var reason: String
    }

    static func parse(_ line: String) -> Result<Parsed, Invalid> {
        guard line.utf8.count <= maxLength else { return .failure(Invalid(reason: "longer than \(maxLength) bytes")) }
        let words = line.split(separator: " ", omittingEmptySubsequences: false)
        guard words.first == "PROXY", words.count >= 2 else { return .failure(Invalid(reason: "not a PROXY protocol v1 header")) }
        switch words[1] {
        case "UNKNOWN":
            return .success(.unknown)
        case "TCP4", "TCP6":
            guard words.count == 6 else { return .failure(Invalid(reason: "a TCP header has 4 fields after its family")) }
            let family = words[1] == "TCP4" ? AF_INET : AF_INET6
            guard isAddress(words[2], family), isAddress(words[3], family) else {
                return .failure(Invalid(reason: "an address is not a \(words[1]) address"))
            }
            guard isPort(words[4]), isPort(words[5]) else { return .failure(Invalid(reason: "a port is not a number from 0 to 65535")) }
            return .success(.client(String(words[2])))
        default:
            return .failure(Invalid(reason: "unknown family \(words[1].prefix(8))"))
        }
    }

    /// A balancer's address as `--proxy-from` names it and as the accepting socket reports its
    /// peer (IPv4-mapped IPv6 as IPv4, so either spelling matches); nil when it is not a
    /// numeric IP address.
    public static func balancerAddress(_ text: String) -> String? {
        let address = text.hasPrefix("::ffff:") ? String(text.dropFirst(7)) : text
        return isAddress(Substring(address), AF_INET) || isAddress(Substring(address), AF_INET6) ? address : nil
    }

    /// The system's parser (`inet_pton`): dotted decimal without leading zeros, or IPv6.
    static func isAddress(_ text: Substring, _ family: Int32) -> Bool {
        var buffer = in6_addr()  // large enough for either family
        return String(text).withCString { inet_pton(family, $0, &buffer) } == 1
    }

    static func isPort(_ text: Substring) -> Bool {
        !text.isEmpty && text.count <= 5 && text.utf8.allSatisfy { (48...57).contains($0) } && (text.count == 1 || text.first != "0") && Int(text)! <= 65535
    }
}
