/// Keyset cursors: the last row's sort-key values and the query's fingerprint, as one opaque
/// word (`c` + hex) that the client passes back with AFTER.
enum Cursor {
    private static let separator: Character = "\u{1F}"
    private static let nilMark = "\u{1E}"

    static func encode(_ values: [String?], fingerprint: String) -> String {
        let text = ([fingerprint] + values.map { $0 ?? nilMark }).joined(separator: String(separator))
        return "c" + text.utf8.map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }

    static func decode(_ token: String, fingerprint: String, count: Int) throws(CommandError) -> [String?] {
        let invalid = CommandError(.validation, "AFTER: this cursor does not belong to this query (pass the one the previous page of the same FIND gave)")
        guard token.hasPrefix("c"), token.count % 2 == 1 else { throw invalid }
        var bytes: [UInt8] = []
        var hex = token.dropFirst()
        while !hex.isEmpty {
            guard let byte = UInt8(hex.prefix(2), radix: 16) else { throw invalid }
            bytes.append(byte)
            hex = hex.dropFirst(2)
        }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw invalid }
        let parts = text.split(separator: separator, omittingEmptySubsequences: false).map(String.init)
        guard parts.count == count + 1, parts[0] == fingerprint else { throw invalid }
        return parts.dropFirst().map { $0 == nilMark ? nil : $0 }
    }
}
