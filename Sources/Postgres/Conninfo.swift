import CLibPQ

/// Connection strings as libpq reads them (URLs and `key=value` lists alike).
public enum Conninfo {
    /// Keywords whose values are secrets.
    static let secret: Set<String> = ["password", "sslpassword"]

    /// `conninfo` as `key=value` pairs without any secret, for logs and INFO; nil when libpq
    /// cannot read it. Only what was given is shown (no defaults).
    public static func describe(_ conninfo: String) -> String? {
        guard let options = given(conninfo) else { return nil }
        return options.map { secret.contains($0.key) ? "\($0.key)=***" : "\($0.key)=\($0.value)" }.joined(separator: " ")
    }

    /// The options given, in libpq's order; nil when libpq cannot read the string.
    static func given(_ conninfo: String) -> [(key: String, value: String)]? {
        var error: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(conninfo, &error) else {
            if let error { PQfreemem(error) }
            return nil
        }
        defer { PQconninfoFree(options) }
        var parts: [(String, String)] = []
        var option = options
        while let keyword = option.pointee.keyword {
            if let value = option.pointee.val { parts.append((String(cString: keyword), String(cString: value))) }
            option += 1
        }
        return parts
    }

    /// How many servers the string names (`host=a,b` or `postgresql://a:1,b:2/...`): more than
    /// one is a replicated formation whose primary may move.
    public static func hostCount(_ conninfo: String) -> Int {
        guard let options = given(conninfo) else { return 1 }
        let hosts = options.filter { $0.key == "host" || $0.key == "hostaddr" }.map { $0.value.split(separator: ",").count }
        return max(1, hosts.max() ?? 1)
    }

    /// Whether no retry can make the string work: libpq cannot read it, or a port is no port.
    /// (An empty string means libpq's environment variables, and is fine.)
    public static func isMalformed(_ conninfo: String) -> Bool {
        guard !conninfo.isEmpty else { return false }
        guard let options = given(conninfo) else { return true }
        for (key, value) in options where key == "port" {
            for port in value.split(separator: ",", omittingEmptySubsequences: false) where !port.isEmpty {
                guard let number = Int(port), (1...65535).contains(number) else { return true }
            }
        }
        return false
    }
}
