/// A key written as it is: what a client makes up for `SAVE KEY k` and what the server hands out
/// (RESUME's token, FIND's cursors). Keys are not words of the request language: a uuid or a
/// ULID often starts with a digit, `order-17` holds a dash, base64 has `+ / =`. So where a key
/// is taken, the line is read up to the next space, not tokenized.
///
/// Grammar: 1 to 200 bytes, each a letter, a digit or one of `- _ . : ~ + / = @`
/// (`3de2b81b-a3f1-4c1a-9d2e-0b1c2d3e4f5a`, `01JDRY8X3T6W6Q0A9M2V5K7C4B`, `order-17`,
/// `bank:w0:1`, `Zm9vYmFy_-`); anything else goes in a quoted string (`SAVE KEY "two words"`).
public enum KeyToken {
    public static let maxBytes = 200

    /// How HELP and syntax errors describe a key.
    public static let grammar = "1 to 200 letters, digits and - _ . : ~ + / = @ (a uuid, a ULID, order-17), or a quoted string"

    public static func isKeyByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            return true
        case UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: ":"), UInt8(ascii: "~"),
             UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: "="), UInt8(ascii: "@"):
            return true
        default:
            return false
        }
    }

    /// Whether `text` can be written bare: otherwise it is sent as a quoted string.
    public static func isBare(_ text: some StringProtocol) -> Bool {
        let bytes = text.utf8
        return !bytes.isEmpty && bytes.count <= maxBytes && bytes.allSatisfy(isKeyByte)
    }

    /// The key as a request writes it: bare when it can be, else quoted.
    public static func literal(_ key: String) -> String {
        isBare(key) ? key : quotedString(key)
    }
}
