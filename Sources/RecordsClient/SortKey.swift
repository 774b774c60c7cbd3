import RecordsProtocol

/// A sort key as FIND's and EXPORT's ORDER BY take it: a key path, compared without case
/// (`name[c]`) or by one of the database's collations (`name COLLATE "sv-x-icu"`), ascending or
/// descending. Read from that text (`SortKey(parsing: "name[c] DESC")`) or built.
public struct SortKey: Sendable, Hashable, CustomStringConvertible {
    public var path: String
    public var caseInsensitive: Bool
    public var collation: String?
    public var descending: Bool

    public init(_ path: String, caseInsensitive: Bool = false, collation: String? = nil, descending: Bool = false) {
        self.path = path
        self.caseInsensitive = caseInsensitive
        self.collation = collation
        self.descending = descending
    }

    /// `path[[c]] [COLLATE name|"name"] [ASC|DESC]`, as a FIND line says it.
    public init(parsing text: String) throws(RecordsError) {
        func refused() -> RecordsError {
            .invalidRequest("ORDER BY takes a key path with [c], COLLATE \"name\", ASC or DESC, not '\(text)'")
        }
        var rest = Substring(text).drop { $0 == " " }
        let path = rest.prefix { $0.isLetter || $0.isNumber || $0 == "_" || $0 == "." || $0 == "@" }
        guard RequestFormat.isKeyPath(String(path)) else { throw refused() }
        self.init(String(path))
        rest = rest.dropFirst(path.count)
        if rest.hasPrefix("[c]") {
            caseInsensitive = true
            rest = rest.dropFirst(3)
        }
        var words = rest.split(separator: " ", omittingEmptySubsequences: true)
        if words.first?.uppercased() == "COLLATE" {
            // A collation's name is a word or a quoted string, as the protocol takes a name.
            let afterCollate = rest.drop { $0 == " " }.dropFirst("COLLATE".count).drop { $0 == " " }
            if afterCollate.hasPrefix("\"") {
                guard let close = afterCollate.dropFirst().firstIndex(of: "\"") else { throw refused() }
                collation = String(afterCollate[afterCollate.index(after: afterCollate.startIndex)..<close])
                words = afterCollate[afterCollate.index(after: close)...].split(separator: " ")
            } else {
                guard words.count >= 2 else { throw refused() }
                collation = String(words[1])
                words.removeFirst(2)
            }
        }
        switch words.map({ $0.uppercased() }) {
        case []: break
        case ["ASC"]: break
        case ["DESC"]: descending = true
        default: throw refused()
        }
    }

    /// The key as ORDER BY takes it, its path checked and its collation quoted.
    public func clause() throws(RecordsError) -> String {
        guard RequestFormat.isKeyPath(path) else { throw .invalidRequest("ORDER BY takes key paths, not '\(path)'") }
        var text = path + (caseInsensitive ? "[c]" : "")
        if let collation { text += " COLLATE " + (try collation.recordsLiteral()) }
        return text + (descending ? " DESC" : "")
    }

    public var description: String { (try? clause()) ?? path }

    /// ` ORDER BY a, b DESC`, or nothing.
    static func orderBy(_ keys: [String]) throws(RecordsError) -> String {
        guard !keys.isEmpty else { return "" }
        var clauses: [String] = []
        for key in keys { clauses.append(try SortKey(parsing: key).clause()) }
        return " ORDER BY " + clauses.joined(separator: ", ")
    }
}
