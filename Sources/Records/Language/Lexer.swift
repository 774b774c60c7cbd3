/// A token of a request line, with the column (1-based, in characters) where it starts.
public struct Token: Equatable, Sendable {
    public enum Kind: Equatable, Sendable {
        /// Verbs, names, key paths (`department.name`, `employees.@count`) and keywords.
        case word(String)
        case number(String)
        case string(String)
        case ref(String)
        /// Operators and punctuation: `= == != <> < <= > >= ( ) { } , && || ! [c]`.
        case symbol(String)
        case end
    }

    public var kind: Kind
    public var offset: Int

    public var word: String? {
        if case .word(let w) = kind { return w }
        return nil
    }

    /// A name as written: a word, or a quoted string (a name that is not one word).
    public var nameText: String? {
        switch kind {
        case .word(let w), .string(let w): w
        default: nil
        }
    }

    /// `keyword` in upper case, ASCII: matched in any case, byte by byte (asked for every
    /// keyword a parser may meet at each token).
    public func isWord(_ keyword: String) -> Bool {
        guard case .word(let w) = kind, w.utf8.count == keyword.utf8.count else { return false }
        return zip(w.utf8, keyword.utf8).allSatisfy { a, b in a == b || (a >= 97 && a <= 122 && a - 32 == b) }
    }

    public func isSymbol(_ symbol: String) -> Bool { kind == .symbol(symbol) }

    /// How the token reads in an error message (a long one cut short: an error never echoes
    /// a whole line back).
    public var display: String {
        func short(_ text: String) -> String { text.count <= 60 ? text : String(text.prefix(60)) + "…" }
        switch kind {
        case .word(let w): return "'\(short(w))'"
        case .number(let n): return short(n)
        case .string(let s): return JSON.quote(short(s))
        case .ref(let r): return "#" + short(r)
        case .symbol(let s): return "'\(s)'"
        case .end: return "end of line"
        }
    }
}

extension String {
    /// Upper case for ASCII letters only: keywords are ASCII, so `ſ` (long s) and `ı` (dotless
    /// i), which `uppercased()` turns into S and I, spell no keyword.
    var asciiUppercased: String {
        String(decoding: utf8.map { $0 >= 97 && $0 <= 122 ? $0 - 32 : $0 }, as: UTF8.self)
    }
}

/// Splits a request line into tokens. Never fails on any input: junk becomes a SYNTAX error
/// with the column where it starts.
public struct Lexer {
    let line: String
    let bytes: [UInt8]
    /// The byte the next token is looked for from.
    var position = 0

    public init(_ line: String) {
        self.line = line
        self.bytes = Array(line.utf8)
    }

    /// All tokens, ending with `.end`.
    public static func tokenize(_ line: String) throws(CommandError) -> [Token] {
        var lexer = Lexer(line)
        var tokens: [Token] = []
        // About a token per four bytes (`name="v"` is three): one allocation for most lines.
        tokens.reserveCapacity(min(lexer.bytes.count / 4, 4096) + 4)
        while true {
            let token = try lexer.next()
            tokens.append(token)
            if case .end = token.kind { return tokens }
        }
    }

    /// Characters consumed so far (for callers that lex only a prefix).
    var consumed: Int { String(decoding: bytes[0..<position], as: UTF8.self).count }

    /// The 1-based character column of a byte offset, for error messages.
    public static func column(of offset: Int, in line: String) -> Int {
        let utf8 = Array(line.utf8)
        let prefix = utf8[0..<min(offset, utf8.count)]
        return (String(decoding: prefix, as: UTF8.self).count) + 1
    }

    private func error(_ message: String, at offset: Int) -> CommandError {
        CommandError(.syntax, "at \(Lexer.column(of: offset, in: line)): \(message)")
    }

    mutating func next() throws(CommandError) -> Token {
        while position < bytes.count, bytes[position] == 32 || bytes[position] == 9 { position += 1 }
        let start = position
        guard position < bytes.count else { return Token(kind: .end, offset: start) }
        let c = bytes[position]
        switch c {
        case UInt8(ascii: "\""), UInt8(ascii: "'"):
            return Token(kind: .string(try readString(quote: c)), offset: start)
        case UInt8(ascii: "#"):
            position += 1
            let name = readWhile(Lexer.isNameByte)
            if name.isEmpty { throw error("expected a name after '#'", at: start) }
            return Token(kind: .ref(name), offset: start)
        case UInt8(ascii: "0")...UInt8(ascii: "9"):
            return Token(kind: .number(try readNumber()), offset: start)
        case UInt8(ascii: "-"), UInt8(ascii: "+"):
            if position + 1 < bytes.count, Lexer.isDigit(bytes[position + 1]) || bytes[position + 1] == UInt8(ascii: ".") {
                return Token(kind: .number(try readNumber()), offset: start)
            }
            throw error("unexpected '\(Character(UnicodeScalar(c)))'", at: start)
        case UInt8(ascii: "."):
            if position + 1 < bytes.count, Lexer.isDigit(bytes[position + 1]) {
                return Token(kind: .number(try readNumber()), offset: start)
            }
            // `SUBQUERY(...).@count`: the operator after the parenthesis.
            if position + 1 < bytes.count, bytes[position + 1] == UInt8(ascii: "@") {
                position += 1
                return Token(kind: .word("." + readWhile { Lexer.isNameByte($0) || $0 == UInt8(ascii: "@") }), offset: start)
            }
            throw error("unexpected '.'", at: start)
        case UInt8(ascii: "$"):
            // A SUBQUERY's variable and key paths through it: `$e`, `$e.age`.
            position += 1
            let rest = readWhile { Lexer.isNameByte($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "@") }
            guard let first = rest.utf8.first, Lexer.isNameStart(first) else { throw error("expected a variable's name after '$'", at: start) }
            return Token(kind: .word("$" + rest), offset: start)
        case UInt8(ascii: "["):
            // A modifier right after a word or an operator (`name[c]`, `==[cd]`), else an
            // array literal's bracket (`tags=["a", "b"]`).
            if let close = bytes[position...].firstIndex(of: UInt8(ascii: "]")), close - position <= 4, close > position + 1,
               bytes[(position + 1)..<close].allSatisfy({ "cdnCDN".utf8.contains($0) }) {
                let inner = String(decoding: bytes[(position + 1)..<close], as: UTF8.self).lowercased()
                position = close + 1
                return Token(kind: .symbol("[" + inner + "]"), offset: start)
            }
            position += 1
            return Token(kind: .symbol("["), offset: start)
        case UInt8(ascii: "]"):
            position += 1
            return Token(kind: .symbol("]"), offset: start)
        default:
            if Lexer.isNameStart(c) {
                return Token(kind: .word(readWhile { Lexer.isNameByte($0) || $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "@") }), offset: start)
            }
            if let symbol = symbol(at: position) {
                position += symbol.utf8.count
                return Token(kind: .symbol(symbol), offset: start)
            }
            let scalar = String(decoding: bytes[position...].prefix(4), as: UTF8.self).first.map(String.init) ?? "?"
            throw error("unexpected character '\(scalar)'", at: start)
        }
    }

    private static func isDigit(_ c: UInt8) -> Bool { c >= 48 && c <= 57 }
    /// The operator or punctuation at `i`, two bytes before one (`<=` before `<`); a switch,
    /// as this runs for every `=` of every INSERT.
    private func symbol(at i: Int) -> String? {
        let next: UInt8 = i + 1 < bytes.count ? bytes[i + 1] : 0
        switch (bytes[i], next) {
        case (UInt8(ascii: "="), UInt8(ascii: "=")): return "=="
        case (UInt8(ascii: "="), UInt8(ascii: "<")): return "=<"
        case (UInt8(ascii: "="), UInt8(ascii: ">")): return "=>"
        case (UInt8(ascii: "="), _): return "="
        case (UInt8(ascii: "!"), UInt8(ascii: "=")): return "!="
        case (UInt8(ascii: "!"), _): return "!"
        case (UInt8(ascii: "<"), UInt8(ascii: ">")): return "<>"
        case (UInt8(ascii: "<"), UInt8(ascii: "=")): return "<="
        case (UInt8(ascii: "<"), _): return "<"
        case (UInt8(ascii: ">"), UInt8(ascii: "=")): return ">="
        case (UInt8(ascii: ">"), _): return ">"
        case (UInt8(ascii: "&"), UInt8(ascii: "&")): return "&&"
        case (UInt8(ascii: "|"), UInt8(ascii: "|")): return "||"
        case (UInt8(ascii: "("), _): return "("
        case (UInt8(ascii: ")"), _): return ")"
        case (UInt8(ascii: "{"), _): return "{"
        case (UInt8(ascii: "}"), _): return "}"
        case (UInt8(ascii: ","), _): return ","
        default: return nil
        }
    }

    private static func isNameStart(_ c: UInt8) -> Bool {
        (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c == 95 || c == 64 || c >= 0x80
    }
    private static func isNameByte(_ c: UInt8) -> Bool { isNameStart(c) || Lexer.isDigit(c) }

    private mutating func readWhile(_ predicate: (UInt8) -> Bool) -> String {
        let start = position
        while position < bytes.count, predicate(bytes[position]) { position += 1 }
        return String(decoding: bytes[start..<position], as: UTF8.self)
    }

    private mutating func readNumber() throws(CommandError) -> String {
        let start = position
        if bytes[position] == UInt8(ascii: "-") || bytes[position] == UInt8(ascii: "+") { position += 1 }
        var digits = 0
        while position < bytes.count, Lexer.isDigit(bytes[position]) { position += 1; digits += 1 }
        if position < bytes.count, bytes[position] == UInt8(ascii: ".") {
            position += 1
            while position < bytes.count, Lexer.isDigit(bytes[position]) { position += 1; digits += 1 }
        }
        if position < bytes.count, bytes[position] == UInt8(ascii: "e") || bytes[position] == UInt8(ascii: "E") {
            position += 1
            if position < bytes.count, bytes[position] == UInt8(ascii: "-") || bytes[position] == UInt8(ascii: "+") { position += 1 }
            var exponent = 0
            while position < bytes.count, Lexer.isDigit(bytes[position]) { position += 1; exponent += 1 }
            if exponent == 0 { throw error("malformed number", at: start) }
        }
        if digits == 0 { throw error("malformed number", at: start) }
        if position < bytes.count, Lexer.isNameStart(bytes[position]) { throw error("malformed number", at: start) }
        // `+5` is kept as `5`.
        return String(decoding: bytes[(bytes[start] == UInt8(ascii: "+") ? start + 1 : start)..<position], as: UTF8.self)
    }

    private mutating func readString(quote: UInt8) throws(CommandError) -> String {
        let start = position
        position += 1
        // Most strings hold no escape: taken as they are, without a copy a byte.
        // Scanned through a pointer, unchecked: a photo's megabyte of base64 is read here, on
        // the event loop.
        let end = bytes.withUnsafeBufferPointer { b in
            var end = position
            while end < b.count, b[end] != quote, b[end] != UInt8(ascii: "\\") { end += 1 }
            return end
        }
        if end < bytes.count, bytes[end] == quote {
            defer { position = end + 1 }
            return String(decoding: bytes[position..<end], as: UTF8.self)
        }
        var out: [UInt8] = []
        while position < bytes.count {
            let c = bytes[position]
            if c == quote {
                position += 1
                return String(decoding: out, as: UTF8.self)
            }
            if c == UInt8(ascii: "\\") {
                guard position + 1 < bytes.count else { break }
                let e = bytes[position + 1]
                position += 2
                switch e {
                case UInt8(ascii: "n"): out.append(10)
                case UInt8(ascii: "t"): out.append(9)
                case UInt8(ascii: "r"): out.append(13)
                case UInt8(ascii: "\\"), UInt8(ascii: "\""), UInt8(ascii: "'"), UInt8(ascii: "/"): out.append(e)
                case UInt8(ascii: "u"):
                    func hex(_ at: Int) -> UInt32? {
                        // Four hex digits exactly: UInt32(radix:) alone takes a sign ("+041").
                        guard at + 4 <= bytes.count, bytes[at..<(at + 4)].allSatisfy({ ($0 >= 48 && $0 <= 57) || ($0 | 0x20 >= 97 && $0 | 0x20 <= 102) }) else { return nil }
                        return UInt32(String(decoding: bytes[at..<(at + 4)], as: UTF8.self), radix: 16)
                    }
                    guard var code = hex(position), code != 0 else {
                        throw error("\\u needs four hex digits of a character other than NUL", at: position - 2)
                    }
                    position += 4
                    // A surrogate pair, as JSON writes a character beyond the first plane: \ud83d\ude00.
                    if (0xD800...0xDBFF).contains(code), position + 6 <= bytes.count, bytes[position] == 92,
                       bytes[position + 1] == UInt8(ascii: "u"), let low = hex(position + 2), (0xDC00...0xDFFF).contains(low) {
                        code = 0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)
                        position += 6
                    }
                    guard let scalar = UnicodeScalar(code) else {
                        throw error("\\u\(String(code, radix: 16)) is half a surrogate pair: give both halves, or the character itself", at: position - 6)
                    }
                    out.append(contentsOf: Array(String(Character(scalar)).utf8))
                default:
                    throw error("unknown escape '\\\(Character(UnicodeScalar(e)))' (use \\\" \\\\ \\n \\t \\r \\uXXXX)", at: position - 2)
                }
                continue
            }
            out.append(c)
            position += 1
        }
        throw error("unterminated string", at: start)
    }
}
