/// Parses NSPredicate-style predicates: comparisons joined by AND / OR / NOT (also && || !),
/// NOT binding tighter than AND, AND tighter than OR, as NSPredicate does.
///
/// Bounded, whatever the line: AND and OR collect their operands in one list (a flat OR of
/// thousands of terms is one level deep), a run of NOTs folds to one or none, and parentheses
/// may nest `maxDepth` deep; past `maxTerms` comparisons or `maxListValues` values in a list
/// the predicate is refused with LIMIT. Recursion follows parentheses only, so it is at most
/// `maxDepth` levels, on any thread's stack.
struct PredicateParser {
    var tokens: TokenStream
    private var depth = 0
    private var terms = 0

    static let maxDepth = 32
    /// Relationships one key path may follow (each is a join).
    static let maxPathHops = 8

    static func checkPath(_ path: String, at column: Int) throws(CommandError) {
        let hops = path.utf8.reduce(0) { $0 + ($1 == UInt8(ascii: ".") ? 1 : 0) }
        guard hops <= maxPathHops else {
            throw CommandError(.limit, "at \(column): a key path follows at most \(maxPathHops) relationships")
        }
    }
    static let maxTerms = 10_000
    /// Words that are values, not key paths, on the right of a comparison.
    static let valueWords: Set<String> = ["true", "yes", "false", "no", "nil", "null"]
    static let maxListValues = 100_000

    init(tokens: TokenStream) { self.tokens = tokens }

    mutating func parse() throws(CommandError) -> Predicate {
        try parseOr()
    }

    private mutating func parseOr() throws(CommandError) -> Predicate {
        var operands = [try parseAnd()]
        while tokens.peek.isWord("OR") || tokens.peek.isSymbol("||") {
            tokens.advance()
            operands.append(try parseAnd())
        }
        return operands.count == 1 ? operands[0] : .or(operands.flatMap { if case .or(let inner) = $0 { inner } else { [$0] } })
    }

    private mutating func parseAnd() throws(CommandError) -> Predicate {
        var operands = [try parseNot()]
        while tokens.peek.isWord("AND") || tokens.peek.isSymbol("&&") {
            tokens.advance()
            operands.append(try parseNot())
        }
        return operands.count == 1 ? operands[0] : .and(operands.flatMap { if case .and(let inner) = $0 { inner } else { [$0] } })
    }

    private mutating func parseNot() throws(CommandError) -> Predicate {
        var negations = 0
        while tokens.peek.isWord("NOT") || tokens.peek.isSymbol("!") {
            tokens.advance()
            negations += 1
        }
        let primary = try parsePrimary()
        guard negations % 2 == 1 else { return primary }
        if case .not(let inner) = primary { return inner }
        return .not(primary)
    }

    /// `SUBQUERY(collection, $v, predicate).@count op n`.
    private mutating func parseSubquery() throws(CommandError) -> Predicate {
        let offset = tokens.peek.offset
        guard depth < Self.maxDepth else {
            throw CommandError(.limit, "at \(tokens.column(of: offset)): SUBQUERY nests deeper than \(Self.maxDepth) levels")
        }
        tokens.advance()
        tokens.advance()
        let collectionToken = tokens.peek
        // Nested in another, the collection goes through the outer variable (`$e.reports`).
        guard case .word(let collection) = collectionToken.kind, !collection.hasPrefix("$") || collection.contains(".") else {
            throw tokens.error("expected a to-many key path in SUBQUERY")
        }
        try Self.checkPath(collection, at: tokens.column(of: collectionToken.offset))
        tokens.advance()
        try tokens.expectSymbol(",", "expected ',' after the SUBQUERY's collection")
        guard case .word(let variable) = tokens.peek.kind, variable.hasPrefix("$"), !variable.contains(".") else {
            throw tokens.error("expected a variable such as $e in SUBQUERY")
        }
        tokens.advance()
        try tokens.expectSymbol(",", "expected ',' after the SUBQUERY's variable")
        depth += 1
        let inner = try parseOr()
        depth -= 1
        try tokens.expectSymbol(")", "expected ')' to close the SUBQUERY")
        guard tokens.peek.isWord(".@COUNT") else { throw tokens.error("expected .@count after SUBQUERY(...)") }
        tokens.advance()
        guard let op = tokens.comparisonSymbol() else { throw tokens.error("expected a comparison after SUBQUERY(...).@count") }
        let count = try tokens.integer("a count")
        return .subquery(Subquery(collection: collection, variable: variable, predicate: inner, op: op, count: count, offset: offset))
    }

    private mutating func parsePrimary() throws(CommandError) -> Predicate {
        if tokens.peek.isSymbol("(") {
            guard depth < Self.maxDepth else {
                throw CommandError(.limit, "at \(tokens.column(of: tokens.peek.offset)): parentheses nest deeper than \(Self.maxDepth) levels")
            }
            tokens.advance()
            depth += 1
            let inner = try parseOr()
            depth -= 1
            try tokens.expectSymbol(")", "expected ')'")
            return inner
        }
        if tokens.peek.isWord("SUBQUERY"), tokens.peek(1).isSymbol("(") { return try parseSubquery() }
        if tokens.peek.isWord("TRUEPREDICATE") { tokens.advance(); return .constant(true) }
        if tokens.peek.isWord("FALSEPREDICATE") { tokens.advance(); return .constant(false) }
        return try parseComparison()
    }

    /// `[ANY|ALL|NONE] keyPath op[c][d] value`, `keyPath IN {v, ...}`, `keyPath BETWEEN {a, b}`,
    /// or `keyPath op otherKeyPath`.
    private mutating func parseComparison() throws(CommandError) -> Predicate {
        terms += 1
        guard terms <= Self.maxTerms else {
            throw CommandError(.limit, "the predicate has more than \(Self.maxTerms) comparisons")
        }
        let quantifier = parseQuantifier()
        let keyToken = tokens.peek
        guard let keyPath = keyToken.nameText else {
            throw tokens.error("expected an attribute or key path")
        }
        try Self.checkPath(keyPath, at: tokens.column(of: keyToken.offset))
        tokens.advance()
        let opToken = tokens.peek
        let op = try parseOperator(after: keyPath)
        var caseInsensitive = false
        var diacriticInsensitive = false
        if case .symbol(let s) = tokens.peek.kind, s.hasPrefix("["), s.hasSuffix("]") {
            caseInsensitive = s.contains("c")
            diacriticInsensitive = s.contains("d")
            tokens.advance()
        }
        let valueOffset = tokens.peek.offset
        let opText = opToken.kind == .end ? "" : (opToken.word ?? { if case .symbol(let s) = opToken.kind { return s }; return "" }())
        var values: [Value]
        if op == .in || op == .between {
            values = try parseList(op, opText: opText, at: valueOffset)
        } else if !op.isStringOperator, let other = tokens.peek.nameText, case .word = tokens.peek.kind, !Self.valueWords.contains(other.lowercased()) {
            // A bare key path on the right: compared field to field (strings go in quotes).
            try Self.checkPath(other, at: tokens.column(of: valueOffset))
            tokens.advance()
            return .comparison(Comparison(
                quantifier: quantifier, keyPath: keyPath, keyPathOffset: keyToken.offset, op: op,
                caseInsensitive: caseInsensitive, diacriticInsensitive: diacriticInsensitive,
                values: [], valueOffset: valueOffset, rightKeyPath: other))
        } else {
            values = [try tokens.value(after: "'\(opText)'")]
        }
        return .comparison(Comparison(
            quantifier: quantifier, keyPath: keyPath, keyPathOffset: keyToken.offset, op: op,
            caseInsensitive: caseInsensitive, diacriticInsensitive: diacriticInsensitive,
            values: values, valueOffset: valueOffset))
    }

    /// ANY, SOME, ALL or NONE before a key path (`any` alone could be an attribute's name).
    private mutating func parseQuantifier() -> Comparison.Quantifier? {
        for q in [("ANY", Comparison.Quantifier.any), ("SOME", .any), ("ALL", .all), ("NONE", .none)]
        where tokens.peek.isWord(q.0) {
            guard case .word = tokens.peek(1).kind else { return nil }
            tokens.advance()
            return q.1
        }
        return nil
    }

    /// A comparison symbol, or a named operator (BEGINSWITH, LIKE, IN ...).
    private mutating func parseOperator(after keyPath: String) throws(CommandError) -> Comparison.Operator {
        if let symbol = tokens.comparisonSymbol() { return symbol }
        if case .word(let w) = tokens.peek.kind, let named = Comparison.Operator(rawValue: w.asciiUppercased), named.rawValue.first!.isLetter {
            tokens.advance()
            return named
        }
        throw tokens.error("expected an operator after '\(keyPath)'")
    }

    /// `{v, ...}` after IN (at most `maxListValues`), or `{low, high}` after BETWEEN.
    private mutating func parseList(_ op: Comparison.Operator, opText: String, at valueOffset: Int) throws(CommandError) -> [Value] {
        try tokens.expectSymbol("{", "expected '{' after \(op.rawValue)")
        var values: [Value] = []
        if !tokens.peek.isSymbol("}") {
            repeat {
                guard values.count < Self.maxListValues else {
                    throw CommandError(.limit, "at \(tokens.column(of: valueOffset)): a list holds at most \(Self.maxListValues) values")
                }
                values.append(try tokens.value(after: "'\(opText)'"))
            } while tokens.consumeSymbol(",")
        }
        try tokens.expectSymbol("}", "expected ',' or '}'")
        if op == .between && values.count != 2 {
            throw CommandError(.syntax, "at \(tokens.column(of: valueOffset)): BETWEEN needs two values: {low, high}")
        }
        return values
    }
}
