/// `AGGREGATE entity fn(path) [AS name], ... [WHERE predicate] [GROUP BY path, ...]
/// [HAVING fn(path) op value [AND ...]] [ORDER BY name [ASC|DESC], ...] [LIMIT n]`: one
/// statement in PostgreSQL, NSExpression's functions, groups by key paths through to-one
/// relationships. Pure syntax here; names are checked against the model when compiled.
public struct AggregateRequest: Equatable, Sendable {
    public enum Function: String, Equatable, Sendable, CaseIterable {
        case count, sum, avg, min, max
    }

    /// `avg(age) AS mean`: the function, its key path (nil: `count()`, every record), and the
    /// name its value has in each group's object.
    public struct Term: Equatable, Sendable {
        public var function: Function
        public var path: String?
        public var name: String
        public var offset: Int
    }

    /// `HAVING avg(age) > 30`.
    public struct Condition: Equatable, Sendable {
        public var term: Term
        public var op: Comparison.Operator
        public var value: Value
    }

    public struct Group: Equatable, Sendable {
        public var path: String
        public var offset: Int
    }

    public var entity: String
    public var terms: [Term] = []
    public var predicate: Predicate?
    public var groups: [Group] = []
    public var having: [Condition] = []
    /// A group's path or a term's name, and the direction.
    public var order: [(name: String, ascending: Bool)] = []
    public var limit: Int?

    public init(entity: String) { self.entity = entity }

    public static func == (a: AggregateRequest, b: AggregateRequest) -> Bool {
        a.entity == b.entity && a.terms == b.terms && a.predicate == b.predicate && a.groups == b.groups && a.having == b.having
            && a.order.elementsEqual(b.order, by: { $0.name == $1.name && $0.ascending == $1.ascending }) && a.limit == b.limit
    }

    /// Terms and groups one AGGREGATE may hold.
    static let maxTerms = 32

    /// The name a term's value gets unless `AS` names it: `count`, `avg_age`, `max_department_number`.
    static func defaultName(_ function: Function, _ path: String?) -> String {
        guard let path else { return function.rawValue }
        return function.rawValue + "_" + path.replacingOccurrences(of: ".", with: "_").replacingOccurrences(of: "@", with: "")
    }
}

extension CommandParser {
    static func aggregateRequest(_ t: inout TokenStream) throws(CommandError) -> AggregateRequest {
        var request = AggregateRequest(entity: try t.name("an entity name"))
        repeat {
            guard request.terms.count < AggregateRequest.maxTerms else {
                throw CommandError(.limit, "AGGREGATE takes at most \(AggregateRequest.maxTerms) functions")
            }
            var term = try aggregateTerm(&t)
            if t.consumeWord("AS") {
                let offset = t.peek.offset
                let name = try t.name("a name after AS")
                guard name.first.map({ $0.isLetter || $0 == "_" }) == true, name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) else {
                    throw CommandError(.syntax, "at \(t.column(of: offset)): AS takes a name of letters, digits and _")
                }
                term.name = name
            }
            guard !request.terms.contains(where: { $0.name == term.name }) else {
                throw CommandError(.syntax, "'\(term.name)' is named twice: give one of them AS another name")
            }
            request.terms.append(term)
            _ = t.consumeSymbol(",")
        } while isTermStart(t)
        // The clauses, each at most once; WHERE before or after GROUP BY.
        while !t.atEnd {
            if t.peek.isWord("WHERE"), request.predicate == nil {
                request.predicate = try whereClause(&t)
            } else if t.consumeWord("GROUP") {
                guard t.consumeWord("BY"), request.groups.isEmpty else { throw t.error("expected BY after GROUP (once)") }
                repeat {
                    guard request.groups.count < AggregateRequest.maxTerms else {
                        throw CommandError(.limit, "GROUP BY takes at most \(AggregateRequest.maxTerms) keys")
                    }
                    let offset = t.peek.offset
                    let path = try t.name("a key path to group by")
                    try PredicateParser.checkPath(path, at: t.column(of: offset))
                    request.groups.append(.init(path: path, offset: offset))
                } while t.consumeSymbol(",")
            } else if t.consumeWord("HAVING") {
                guard request.having.isEmpty else { throw t.error("HAVING once") }
                repeat {
                    let term = try aggregateTerm(&t)
                    guard let op = t.comparisonSymbol() else { throw t.error("expected a comparison (== != < <= > >=) in HAVING") }
                    request.having.append(.init(term: term, op: op, value: try t.value(after: "the comparison")))
                } while t.consumeWord("AND")
            } else if t.consumeWord("ORDER") {
                guard t.consumeWord("BY"), request.order.isEmpty else { throw t.error("expected BY after ORDER (once)") }
                repeat {
                    let name = try t.name("a group's key path or a function's name to order by")
                    var ascending = true
                    if t.consumeWord("DESC") { ascending = false } else { _ = t.consumeWord("ASC") }
                    request.order.append((name, ascending))
                } while t.consumeSymbol(",") && request.order.count < AggregateRequest.maxTerms
            } else if t.consumeWord("LIMIT") {
                guard request.limit == nil else { throw t.error("LIMIT once") }
                request.limit = try t.integer("a limit")
            } else {
                throw t.error("expected WHERE, GROUP BY, HAVING, ORDER BY or LIMIT")
            }
        }
        return request
    }

    /// `count()`, `count(path)`, `sum(path)`, `avg(path)`, `min(path)`, `max(path)`.
    private static func aggregateTerm(_ t: inout TokenStream) throws(CommandError) -> AggregateRequest.Term {
        let offset = t.peek.offset
        guard case .word(let word) = t.peek.kind, let function = AggregateRequest.Function(rawValue: word.lowercased()) else {
            throw t.error("expected count(), sum(path), avg(path), min(path) or max(path)")
        }
        t.advance()
        try t.expectSymbol("(", "expected '(' after \(function.rawValue)")
        var path: String?
        if !t.peek.isSymbol(")") {
            let pathOffset = t.peek.offset
            path = try t.name("a key path")
            try PredicateParser.checkPath(path!, at: t.column(of: pathOffset))
        }
        try t.expectSymbol(")", "expected ')'")
        guard path != nil || function == .count else { throw CommandError(.syntax, "\(function.rawValue)() needs a key path: \(function.rawValue)(age)") }
        return .init(function: function, path: path, name: AggregateRequest.defaultName(function, path), offset: offset)
    }

    private static func isTermStart(_ t: TokenStream) -> Bool {
        guard case .word(let word) = t.peek.kind, AggregateRequest.Function(rawValue: word.lowercased()) != nil else { return false }
        return t.peek(1).isSymbol("(")
    }
}
