/// Parses NSPredicate-style predicates: comparisons joined by AND / OR / NOT (also && || !),
/// NOT binding tighter than AND, AND tighter than OR, as NSPredicate does.
struct PredicateParser {
    var tokens: TokenStream

    mutating func parse() throws(CommandError) -> Predicate {
        try parseOr()
    }

    private mutating func parseOr() throws(CommandError) -> Predicate {
        var left = try parseAnd()
        while tokens.peek.isWord("OR") || tokens.peek.isSymbol("||") {
            tokens.advance()
            left = .or(left, try parseAnd())
        }
        return left
    }

    private mutating func parseAnd() throws(CommandError) -> Predicate {
        var left = try parseNot()
        while tokens.peek.isWord("AND") || tokens.peek.isSymbol("&&") {
            tokens.advance()
            left = .and(left, try parseNot())
        }
        return left
    }

    private mutating func parseNot() throws(CommandError) -> Predicate {
        if tokens.peek.isWord("NOT") || tokens.peek.isSymbol("!") {
            tokens.advance()
            return .not(try parseNot())
        }
        return try parsePrimary()
    }

    private mutating func parsePrimary() throws(CommandError) -> Predicate {
        if tokens.peek.isSymbol("(") {
            tokens.advance()
            let inner = try parseOr()
            try tokens.expectSymbol(")", "expected ')'")
            return inner
        }
        if tokens.peek.isWord("TRUEPREDICATE") { tokens.advance(); return .constant(true) }
        if tokens.peek.isWord("FALSEPREDICATE") { tokens.advance(); return .constant(false) }

        var quantifier: Comparison.Quantifier?
        for q in [("ANY", Comparison.Quantifier.any), ("SOME", .any), ("ALL", .all), ("NONE", .none)]
        where tokens.peek.isWord(q.0) {
            // `any` could be an attribute's name: a quantifier is followed by a key path.
            if case .word = tokens.peek(1).kind {
                quantifier = q.1
                tokens.advance()
            }
            break
        }
        let keyToken = tokens.peek
        guard let keyPath = keyToken.word else {
            throw tokens.error("expected an attribute or key path")
        }
        tokens.advance()
        let opToken = tokens.peek
        let op: Comparison.Operator
        switch opToken.kind {
        case .symbol("=="), .symbol("="): op = .equal
        case .symbol("!="), .symbol("<>"): op = .notEqual
        case .symbol("<"): op = .less
        case .symbol("<="), .symbol("=<"): op = .lessOrEqual
        case .symbol(">"): op = .greater
        case .symbol(">="), .symbol("=>"): op = .greaterOrEqual
        case .word(let w):
            guard let named = Comparison.Operator(rawValue: w.uppercased()), named.rawValue.first!.isLetter else {
                throw tokens.error("expected an operator after '\(keyPath)'")
            }
            op = named
        default:
            throw tokens.error("expected an operator after '\(keyPath)'")
        }
        tokens.advance()
        var caseInsensitive = false
        var diacriticInsensitive = false
        if case .symbol(let s) = tokens.peek.kind, s.hasPrefix("[") {
            caseInsensitive = s.contains("c")
            diacriticInsensitive = s.contains("d")
            tokens.advance()
        }
        let valueOffset = tokens.peek.offset
        let opText = opToken.kind == .end ? "" : (opToken.word ?? { if case .symbol(let s) = opToken.kind { return s }; return "" }())
        var values: [Value]
        if op == .in || op == .between {
            try tokens.expectSymbol("{", "expected '{' after \(op.rawValue)")
            values = []
            if !tokens.peek.isSymbol("}") {
                repeat {
                    values.append(try tokens.value(after: "'\(opText)'"))
                } while tokens.consumeSymbol(",")
            }
            try tokens.expectSymbol("}", "expected ',' or '}'")
            if op == .between && values.count != 2 {
                throw CommandError(.syntax, "at \(tokens.column(of: valueOffset)): BETWEEN needs two values: {low, high}")
            }
        } else {
            values = [try tokens.value(after: "'\(opText)'")]
        }
        return .comparison(Comparison(
            quantifier: quantifier, keyPath: keyPath, keyPathOffset: keyToken.offset, op: op,
            caseInsensitive: caseInsensitive, diacriticInsensitive: diacriticInsensitive,
            values: values, valueOffset: valueOffset))
    }
}
