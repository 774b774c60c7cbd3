import CLibPQ

/// Connection strings as libpq reads them (URLs and `key=value` lists alike).
public enum Conninfo {
    /// Keywords whose values are secrets.
    static let secret: Set<String> = ["password", "sslpassword"]

    /// `conninfo` as `key=value` pairs without any secret, for logs and INFO; nil when libpq
    /// cannot read it. Only what was given is shown (no defaults).
    public static func describe(_ conninfo: String) -> String? {
        var error: UnsafeMutablePointer<CChar>?
        guard let options = PQconninfoParse(conninfo, &error) else {
            if let error { PQfreemem(error) }
            return nil
        }
        defer { PQconninfoFree(options) }
        var parts: [String] = []
        var option = options
        while let keyword = option.pointee.keyword {
            let key = String(cString: keyword)
            if let value = option.pointee.val {
                parts.append(secret.contains(key) ? "\(key)=***" : "\(key)=\(String(cString: value))")
            }
            option += 1
        }
        return parts.joined(separator: " ")
    }
}
