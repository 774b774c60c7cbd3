/// Bytes as lowercase hex, written into one buffer: bytea's input (`\x...`) and cursors. A
/// string formatted per byte took a second for a photo of 700 KB on the event loop, every other
/// session waiting.
enum Hex {
    static func lowercase(_ bytes: UnsafeRawBufferPointer, prefix: String = "") -> String {
        let head = Array(prefix.utf8)
        let digits: StaticString = "0123456789abcdef"
        return String(unsafeUninitializedCapacity: head.count + bytes.count * 2) { buffer in
            var at = 0
            for byte in head { buffer[at] = byte; at += 1 }
            digits.withUTF8Buffer { digits in
                for byte in bytes {
                    buffer[at] = digits[Int(byte >> 4)]
                    buffer[at + 1] = digits[Int(byte & 0x0f)]
                    at += 2
                }
            }
            return at
        }
    }

    static func lowercase(_ bytes: [UInt8], prefix: String = "") -> String {
        bytes.withUnsafeBytes { lowercase($0, prefix: prefix) }
    }

    /// Hex digits (either case) as bytes; nil for an odd count or a non-hex digit.
    static func decode(_ hex: Substring) -> [UInt8]? {
        let utf8 = hex.utf8
        guard utf8.count % 2 == 0 else { return nil }
        func value(_ digit: UInt8) -> UInt8? {
            switch digit {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit - UInt8(ascii: "a") + 10
            case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
            default: nil
            }
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(utf8.count / 2)
        var high: UInt8?
        for digit in utf8 {
            guard let nibble = value(digit) else { return nil }
            if let h = high {
                bytes.append(h << 4 | nibble)
                high = nil
            } else {
                high = nibble
            }
        }
        return bytes
    }
}
