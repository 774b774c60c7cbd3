import Foundation

/// Keyset cursors: the last row's sort-key values and the query's fingerprint, as one opaque
/// word (`c` + hex of a JSON array) that the client passes back with AFTER. JSON holds any text
/// a key may hold, so no value can break a cursor.
enum Cursor {
    static func encode(_ values: [String?], fingerprint: String) -> String {
        let array: [Any] = [fingerprint] + values.map { $0.map { $0 as Any } ?? NSNull() }
        let data = (try? JSONSerialization.data(withJSONObject: array)) ?? Data()
        return "c" + data.map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }

    static func decode(_ token: String, fingerprint: String, count: Int) throws(CommandError) -> [String?] {
        let invalid = CommandError(.validation, "AFTER: this cursor does not belong to this query (pass the one the previous page of the same FIND gave)")
        guard token.hasPrefix("c"), token.count % 2 == 1, token.count < 1 << 20 else { throw invalid }
        var bytes: [UInt8] = []
        var hex = token.dropFirst()
        while !hex.isEmpty {
            guard let byte = UInt8(hex.prefix(2), radix: 16) else { throw invalid }
            bytes.append(byte)
            hex = hex.dropFirst(2)
        }
        guard let array = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [Any], array.count == count + 1,
              array[0] as? String == fingerprint else { throw invalid }
        var values: [String?] = []
        for item in array.dropFirst() {
            if item is NSNull { values.append(nil) } else if let text = item as? String { values.append(text) } else { throw invalid }
        }
        return values
    }
}
