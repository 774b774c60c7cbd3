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
}
