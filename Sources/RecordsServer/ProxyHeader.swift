/// The PROXY protocol's version 1 header (HAProxy's `send-proxy`): the first line a trusted
/// balancer sends on a connection, naming the client it carries. Behind a balancer every
/// client comes from the balancer's address; the header gives login throttling, the
/// loopback rule for AUTH and the logs the client's own. Pure: parsed without I/O.
///
///     PROXY TCP4 203.0.113.7 192.0.2.1 51234 7878
///     PROXY UNKNOWN
enum ProxyHeader {
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
            let source = String(words[2]), target = String(words[3])
            let valid = words[1] == "TCP4" ? isIPv4 : isIPv6
            guard valid(source), valid(target) else { return .failure(Invalid(reason: "an address is not a \(words[1]) address")) }
            guard isPort(words[4]), isPort(words[5]) else { return .failure(Invalid(reason: "a port is not a number from 0 to 65535")) }
            return .success(.client(source))
        default:
            return .failure(Invalid(reason: "unknown family \(words[1].prefix(8))"))
        }
    }

    /// Dotted decimal, four parts of 0-255, no leading zeros (the specification's form).
    static func isIPv4(_ text: String) -> Bool {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        return parts.count == 4 && parts.allSatisfy { part in
            !part.isEmpty && part.count <= 3 && part.allSatisfy(\.isASCIIDigit) && (part.count == 1 || part.first != "0") && Int(part)! <= 255
        }
    }

    /// Hex groups and colons (at most one `::`), or an IPv4-mapped tail; checked loosely but
    /// never letting through anything but those characters.
    static func isIPv6(_ text: String) -> Bool {
        guard (2...45).contains(text.count), text.contains(":"),
              text.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else { return false }
        let doubles = text.components(separatedBy: "::").count - 1
        let groups = text.split(separator: ":", omittingEmptySubsequences: true)
        guard doubles <= 1, groups.count <= 8 else { return false }
        return groups.allSatisfy { group in group.contains(".") ? isIPv4(String(group)) : group.count <= 4 }
    }

    static func isPort(_ text: Substring) -> Bool {
        !text.isEmpty && text.count <= 5 && text.allSatisfy(\.isASCIIDigit) && (text.count == 1 || text.first != "0") && Int(text)! <= 65535
    }
}

private extension Character {
    var isASCIIDigit: Bool { isASCII && isNumber }
}
