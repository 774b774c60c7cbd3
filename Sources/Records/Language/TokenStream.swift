/// A cursor over a line's tokens with the error helpers every parser needs.
struct TokenStream {
    let line: String
    let tokens: [Token]
    private(set) var index = 0

    init(line: String) throws(CommandError) {
        self.line = line
        self.tokens = try Lexer.tokenize(line)
    }

    var peek: Token { tokens[index] }
    func peek(_ ahead: Int) -> Token { tokens[min(index + ahead, tokens.count - 1)] }
    var atEnd: Bool { peek.kind == .end }

    mutating func advance() {
        if index < tokens.count - 1 { index += 1 }
    }

    func column(of offset: Int) -> Int { Lexer.column(of: offset, in: line) }

    func error(_ message: String) -> CommandError {
        let found = peek.kind == .end ? "" : ", found \(peek.display)"
        return CommandError(.syntax, "at \(column(of: peek.offset)): \(message)\(found)")
    }

    mutating func consumeSymbol(_ symbol: String) -> Bool {
        guard peek.isSymbol(symbol) else { return false }
        advance()
        return true
    }

    mutating func consumeWord(_ keyword: String) -> Bool {
        guard peek.isWord(keyword) else { return false }
        advance()
        return true
    }

    /// A comparison written as a symbol (`==`, `<>`, `>=` ...), taken; nil when the next
    /// token is none.
    mutating func comparisonSymbol() -> Comparison.Operator? {
        guard case .symbol(let symbol) = peek.kind, let op = Comparison.Operator(symbol: symbol) else { return nil }
        advance()
        return op
    }

    mutating func expectSymbol(_ symbol: String, _ message: String) throws(CommandError) {
        guard consumeSymbol(symbol) else { throw error(message) }
    }

    /// A name: a word, or a quoted string for a name that is not one word (`"Tag Table"`).
    mutating func name(_ what: String) throws(CommandError) -> String {
        switch peek.kind {
        case .word(let word), .string(let word):
            advance()
            return word
        default:
            throw error("expected \(what)")
        }
    }

    /// A literal: number, string, true/false, nil/null, or #ref.
    /// `context` is made only for an error (every pair of an INSERT line comes here).
    mutating func value(after context: @autoclosure () -> String) throws(CommandError) -> Value {
        if peek.isSymbol("[") { return try arrayValue(depth: 0) }
        guard let value = Value(token: peek) else {
            if case .word = peek.kind { throw error("expected a value after \(context()) (strings go in double quotes)") }
            throw error("expected a value after \(context())")
        }
        advance()
        return value
    }

    /// Elements of one array literal, nested ones counted.
    static let maxArrayElements = 100_000

    /// `[v, v, ...]`, arrays inside arrays for more dimensions (`[[1, 2], [3, 4]]`).
    private mutating func arrayValue(depth: Int) throws(CommandError) -> Value {
        guard depth < 6 else { throw error("arrays nest at most 6 deep") }
        advance()  // [
        var elements: [Value] = []
        if consumeSymbol("]") { return .array([]) }
        repeat {
            guard elements.count < Self.maxArrayElements else {
                throw CommandError(.limit, "an array literal takes at most \(Self.maxArrayElements) elements")
            }
            if peek.isSymbol("[") {
                elements.append(try arrayValue(depth: depth + 1))
            } else if let value = Value(token: peek) {
                if case .ref = value { throw error("an array holds values, not #refs") }
                elements.append(value)
                advance()
            } else {
                throw error("expected a value in the array (strings go in double quotes)")
            }
        } while consumeSymbol(",")
        guard consumeSymbol("]") else { throw error("expected , or ] in the array") }
        return .array(elements)
    }

    mutating func integer(_ what: String) throws(CommandError) -> Int {
        guard case .number(let n) = peek.kind, let value = Int(n), value >= 0 else {
            throw error("expected \(what) (a whole number, 0 or more)")
        }
        advance()
        return value
    }

    mutating func expectEnd() throws(CommandError) {
        guard atEnd else { throw error("unexpected input") }
    }
}

extension Value {
    /// The literal a token is: number, string, true/false (yes/no), nil/null, or #ref.
    init?(token: Token) {
        switch token.kind {
        case .number(let n): self = .number(n)
        case .string(let s): self = .string(s)
        case .ref(let r): self = .ref(r)
        case .word:
            if token.isWord("TRUE") || token.isWord("YES") { self = .bool(true) }
            else if token.isWord("FALSE") || token.isWord("NO") { self = .bool(false) }
            else if token.isWord("NIL") || token.isWord("NULL") { self = .null }
            else { return nil }
        default: return nil
        }
    }
}
