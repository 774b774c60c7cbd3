import Foundation

/// `[d]` (diacritic-insensitive) without any PostgreSQL extension: the column is folded with
/// `translate(value, from, to)`, from every Latin letter with a diacritic to its base letter
/// (Latin-1 Supplement and Latin Extended-A, found by Unicode decomposition); the pattern is
/// folded in Swift the same way.
enum Diacritics {
    static let map: (from: String, to: String) = {
        var from = "", to = ""
        for value in UInt32(0xC0)...UInt32(0x17F) {
            guard let scalar = UnicodeScalar(value), scalar.properties.isAlphabetic else { continue }
            let base = String(scalar).decomposedStringWithCanonicalMapping.unicodeScalars.first!
            guard base.isASCII, base != scalar else { continue }
            from.unicodeScalars.append(scalar)
            to.unicodeScalars.append(base)
        }
        return (from, to)
    }()

    private static let table: [Character: Character] = {
        Dictionary(zip(map.from, map.to), uniquingKeysWith: { a, _ in a })
    }()

    static func fold(_ text: String) -> String {
        String(text.map { table[$0] ?? $0 })
    }
}
