import Foundation

/// `records://[user[:password]@]host[:port][?tls=require]` or `recordss://...` (TLS from the
/// first byte); an IPv6 host in brackets (`records://[::1]:7878`). Parsed once here for the
/// library and the CLI.
public struct RecordsURL: Sendable, Equatable {
    public enum TLSMode: Sendable, Equatable { case off, startTLS, direct }

    /// Nil when the URL names none (`records://alice@` keeps the default host).
    public var host: String?
    public var port: Int?
    public var user: String?
    public var password: String?
    public var tls: TLSMode

    public static let defaultPort = 7878

    public init(_ url: String) throws(RecordsError) {
        guard let parsed = URLComponents(string: url), let given = parsed.scheme else {
            throw .invalidRequest("'\(url)' is not a URL like records://user@host:7878")
        }
        let scheme = given.lowercased()
        guard scheme == "records" || scheme == "recordss" else {
            throw .invalidRequest("the scheme is records:// or recordss://, not \(scheme)://")
        }
        if var host = parsed.host, !host.isEmpty {
            if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
            self.host = host
        }
        if let port = parsed.port {
            guard (1...65535).contains(port) else { throw .invalidRequest("'\(url)': a port is 1 to 65535, not \(port)") }
            self.port = port
        }
        // URLComponents has decoded them once already (`%2541` is `%41`, not `A`).
        if let user = parsed.user, !user.isEmpty { self.user = user }
        password = parsed.password
        if scheme == "recordss" {
            tls = .direct
        } else if parsed.queryItems?.contains(where: { $0.name == "tls" && $0.value == "require" }) == true {
            tls = .startTLS
        } else {
            tls = .off
        }
    }

    public func security(caFile: String?) -> Security {
        switch tls {
        case .off: .plain
        case .startTLS: .startTLS(caFile: caFile)
        case .direct: .direct(caFile: caFile)
        }
    }
}
