import Foundation

/// `[d]` (diacritic-insensitive) without any PostgreSQL extension: the column is folded with
/// `translate(value, from, to)`, from every Latin letter with a diacritic to its base letter
/// (Latin-1 Supplement, Latin Extended-A and -B, Latin Extended Additional: Vietnamese,
/// Romanian ș ț..., found by Unicode decomposition), and the combining marks NFC leaves
/// (U+0300-036F) deleted (translate drops what `from` has beyond `to`); the pattern is folded
/// in Swift the same way.
enum Diacritics {
    static let map: (from: String, to: String) = {
        var from = "", to = ""
        for value in Array(UInt32(0xC0)...UInt32(0x24F)) + Array(UInt32(0x1E00)...UInt32(0x1EFF)) {
            guard let scalar = UnicodeScalar(value), scalar.properties.isAlphabetic else { continue }
            let base = String(scalar).decomposedStringWithCanonicalMapping.unicodeScalars.first!
            guard base.isASCII, base != scalar else { continue }
            from.unicodeScalars.append(scalar)
            to.unicodeScalars.append(base)
        }
        for mark in UInt32(0x300)...UInt32(0x36F) { from.unicodeScalars.append(UnicodeScalar(mark)!) }
        return (from, to)
    }()


    static func fold(_ text: String) -> String {
        var out = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            if (0x300...0x36F).contains(scalar.value) { continue }
            out.append(scalars[scalar] ?? scalar)
        }
        return String(out)
    }

    private static let scalars: [Unicode.Scalar: Unicode.Scalar] = {
        Dictionary(zip(map.from.unicodeScalars, map.to.unicodeScalars), uniquingKeysWith: { a, _ in a })
    }()
}
