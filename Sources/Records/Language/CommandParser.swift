import Foundation
import RecordsProtocol

/// Turns a request line into a `Command`. Purely syntactic: entity and attribute names are
/// checked against the model when the command runs.
public enum CommandParser {
    /// The verb a line starts with, if its first word is one; cheap enough for every line.
    public static func notAVerb(_ line: String) -> CommandError {
        let word = String(decoding: line.utf8.drop { $0 == 32 || $0 == 9 }.prefix { $0 != 32 && $0 != 9 }.prefix(40), as: UTF8.self)
        if word.isEmpty { return CommandError(.syntax, "empty line: type HELP for the list of verbs") }
        return CommandError(.unknown, "unknown verb '\(word)'\(suggestion(for: word)): type HELP for the list")
    }

    public static func parse(_ line: String) throws(CommandError) -> Command {
        try parse(line, verb: Verb.of(line))
    }

    /// `first`: `Verb.of(line)`, which the caller read already.
    public static func parse(_ line: String, verb first: Verb?) throws(CommandError) -> Command {
        if first == .auth || first == .user { return try parseCredentials(line) }
        if first == .save { return try parseSave(line) }
        if first == .resume { return try parseResume(line) }
        if first == .cancel { return try parseCancel(line) }
        var tokens = try TokenStream(line: line)
        guard let verbWord = tokens.peek.word else {
            if tokens.atEnd { throw CommandError(.syntax, "empty line: type HELP for the list of verbs") }
            throw tokens.error("expected a verb (type HELP)")
        }
        // A verb `Verb.of` found is the first word, in letters only: the same word.
        guard let verb = first ?? Verb(rawValue: verbWord.asciiUppercased) else { throw notAVerb(line) }
        tokens.advance()
        let command = try parse(verb, &tokens)
        try tokens.expectEnd()
        return command
    }

    private static func parse(_ verb: Verb, _ t: inout TokenStream) throws(CommandError) -> Command {
        switch verb {
        case .help:
            if t.atEnd { return .help(nil) }
            return .help(try t.name("a verb"))
        case .ping:
            return try parsePing(&t)
        case .quit: return .quit
        case .starttls: return .startTLS
        case .info: return .info
        case .format:
            if t.consumeWord("JSON") { return .format(json: true) }
            if t.consumeWord("TEXT") { return .format(json: false) }
            throw t.error("expected TEXT or JSON")
        case .entities: return .entities
        case .describe: return .describe(try t.name("an entity name"))
        case .insert:
            let entity = try t.name("an entity name")
            return .insert(entity: entity, ref: try refName(&t), values: try assignments(&t, required: false))
        case .update:
            return try parseUpdate(&t)
        case .delete:
            return try parseDelete(&t)
        case .upsert:
            return try parseUpsert(&t)
        case .changes: return .changes(countOnly: t.consumeWord("COUNT"))
        case .save:
            return try parseSave(t.line)
        case .rollback: return .rollback
        case .nest: return .nest
        case .merge: return .merge
        case .discard: return .discard
        case .get:
            let entity = try t.name("an entity name")
            let id = try address(&t)
            let (paths, orders) = try include(&t)
            return .get(entity: entity, id: id, include: paths, includeOrder: orders)
        case .find:
            return .find(try fetchRequest(&t))
        case .aggregate:
            return .aggregate(try aggregateRequest(&t))
        case .count:
            let entity = try t.name("an entity name")
            let predicate = try whereClause(&t)
            return .count(entity: entity, predicate: predicate, estimate: t.consumeWord("ESTIMATE"))
        case .auth, .user:
            return try parseCredentials(t.line)
        case .resume:
            return try parseResume(t.line)
        case .cancel:
            return try parseCancel(t.line)  // read above, keys lexed as words
        case .watch:
            let entity = try t.name("an entity name")
            return .watch(entity: entity, predicate: try whereClause(&t))
        case .unwatch:
            return .unwatch(entity: t.atEnd ? nil : try t.name("an entity name"))
        case .export:
            let request = try fetchRequest(&t)
            guard request.limit == nil, request.offset == nil, request.after == nil, request.include.isEmpty else {
                throw CommandError(.syntax, "EXPORT takes WHERE, ORDER BY and SELECT only")
            }
            return .export(request)
        case .import:
            return try parseImport(&t)
        case .explain:
            return try parseExplain(&t)
        }
    }


    /// `PING [words]`: the words echoed.
    private static func parsePing(_ t: inout TokenStream) throws(CommandError) -> Command {
        var words: [String] = []
        while !t.atEnd {
            let token = t.peek
            switch token.kind {
            case .string(let s): words.append(s)
            case .word(let w), .number(let w): words.append(w)
            default: words.append(token.display)
            }
            t.advance()
        }
        return .ping(words.isEmpty ? nil : words.joined(separator: " "))
    }

    /// `UPDATE e key SET ...`, `UPDATE e attr=v ... SET ...`, or `UPDATE e WHERE ... SET ...`.
    private static func parseUpdate(_ t: inout TokenStream) throws(CommandError) -> Command {
        let entity = try t.name("an entity name")
        if let predicate = try whereClause(&t) {
            guard t.consumeWord("SET") else { throw t.error("expected SET attr=value ... after the predicate") }
            return .updateWhere(entity: entity, predicate: predicate, values: try assignments(&t, required: true),
                                text: t.line.trimmingCharacters(in: .whitespaces))
        }
        let id = try address(&t)
        let set = t.consumeWord("SET")
        if case .fields = id, !set { throw t.error("expected SET before the new values (the attr=value pairs before it name the record)") }
        return .update(entity: entity, id: id, values: try assignments(&t, required: true))
    }

    /// `DELETE e key` or `DELETE e WHERE ...`.
    private static func parseDelete(_ t: inout TokenStream) throws(CommandError) -> Command {
        let entity = try t.name("an entity name")
        if let predicate = try whereClause(&t) {
            return .deleteWhere(entity: entity, predicate: predicate, text: t.line.trimmingCharacters(in: .whitespaces))
        }
        return .delete(entity: entity, id: try address(&t))
    }

    /// `UPSERT e [AS #name] ON attr[, attr] attr=v ...`.
    private static func parseUpsert(_ t: inout TokenStream) throws(CommandError) -> Command {
        let entity = try t.name("an entity name")
        let ref = try refName(&t)
        guard t.consumeWord("ON") else { throw t.error("expected \(ref == nil ? "AS #name or " : "")ON unique_attribute") }
        var key = [try t.name("a unique attribute after ON")]
        while t.consumeSymbol(",") { key.append(try t.name("an attribute of the unique key")) }
        return .upsert(entity: entity, ref: ref, key: key, values: try assignments(&t, required: true))
    }

    /// `IMPORT e [(columns)]`: its data lines follow.
    private static func parseImport(_ t: inout TokenStream) throws(CommandError) -> Command {
        let entity = try t.name("an entity name")
        guard t.consumeSymbol("(") else { return .importData(entity: entity, columns: nil) }
        var columns: [String] = []
        repeat { columns.append(try t.name("a column name")) } while t.consumeSymbol(",")
        try t.expectSymbol(")", "expected ')' after the columns")
        return .importData(entity: entity, columns: columns)
    }

    /// `EXPLAIN FIND ...`, `EXPLAIN COUNT ...` or `EXPLAIN AGGREGATE ...`.
    private static func parseExplain(_ t: inout TokenStream) throws(CommandError) -> Command {
        if t.consumeWord("FIND") { return .explain(try fetchRequest(&t)) }
        if t.consumeWord("COUNT") {
            guard case .count(let entity, let predicate, false) = try parse(.count, &t) else {
                throw CommandError(.syntax, "EXPLAIN COUNT does not take ESTIMATE")
            }
            return .explain(FetchRequest(entity: entity, predicate: predicate, limit: 0))
        }
        if t.consumeWord("AGGREGATE") { return .explainAggregate(try aggregateRequest(&t)) }
        throw t.error("expected FIND, COUNT or AGGREGATE after EXPLAIN")
    }

    /// Keys one ORDER BY may take.
    static let maxOrderKeys = 32

    private static func fetchRequest(_ t: inout TokenStream) throws(CommandError) -> FetchRequest {
            var request = FetchRequest(entity: try t.name("an entity name"))
            try selectClause(&t, into: &request)
            request.predicate = try whereClause(&t)
            if request.select.isEmpty { try selectClause(&t, into: &request) }
            if t.consumeWord("ORDER") {
                guard t.consumeWord("BY") else { throw t.error("expected BY after ORDER") }
                repeat {
                    guard request.order.count < Self.maxOrderKeys else {
                        throw CommandError(.limit, "ORDER BY takes at most \(Self.maxOrderKeys) keys")
                    }
                    request.order.append(try orderKey(&t, "a key to order by"))
                } while t.consumeSymbol(",")
            }
            if t.consumeWord("LIMIT") { request.limit = try t.integer("a limit") }
            if t.consumeWord("OFFSET") { request.offset = try t.integer("an offset") }
            if t.consumeWord("AFTER") {
                guard request.offset == nil else { throw t.error("use OFFSET or AFTER, not both") }
                switch t.peek.kind {
                case .word(let token), .string(let token): request.after = token
                default: throw t.error("expected the cursor a previous page gave (AFTER c...)")
                }
                t.advance()
            }
            (request.include, request.includeOrder) = try include(&t)
            if request.select.isEmpty { try selectClause(&t, into: &request) }
            guard request.select.isEmpty || request.include.isEmpty else { throw CommandError(.syntax, "SELECT and INCLUDE do not go together") }
            return request
    }

    /// `SELECT [DISTINCT] path, ...`, right after the entity or last.
    private static func selectClause(_ t: inout TokenStream, into request: inout FetchRequest) throws(CommandError) {
        guard t.consumeWord("SELECT") else { return }
        request.distinct = t.consumeWord("DISTINCT")
        repeat {
            guard request.select.count < maxOrderKeys else { throw CommandError(.limit, "SELECT takes at most \(maxOrderKeys) key paths") }
            let offset = t.peek.offset
            let path = try t.name("a key path to select")
            try PredicateParser.checkPath(path, at: t.column(of: offset))
            guard !request.select.contains(where: { $0.lowercased() == path.lowercased() }) else { throw CommandError(.syntax, "'\(path)' is selected twice") }
            request.select.append(path)
        } while t.consumeSymbol(",")
    }

    /// AUTH and USER take raw words, as people type passwords: split on spaces, a
    /// double-quoted word unescaped as a string.
    private static func parseCredentials(_ line: String) throws(CommandError) -> Command {
        var words: [String] = []
        var rest = Substring(line)
        while true {
            rest = rest.drop { $0 == " " || $0 == "\t" }
            guard let head = rest.first else { break }
            if head == "\"" {
                var lexer = Lexer(String(rest))
                guard case .string(let text) = try lexer.next().kind else { throw CommandError(.syntax, "malformed quoted word") }
                words.append(text)
                rest = rest.dropFirst(lexer.consumed)
            } else {
                let word = rest.prefix { $0 != " " && $0 != "\t" }
                words.append(String(word))
                rest = rest.dropFirst(word.count)
            }
        }
        let usage = CommandError(.syntax, "usage: \(Verb.auth.syntax) | \(Verb.user.syntax)")
        switch (words.first?.asciiUppercased, words.count) {
        case ("AUTH"?, 3): return .auth(name: words[1], password: words[2])
        case ("AUTH"?, _): throw CommandError(.syntax, "usage: \(Verb.auth.syntax) (quote a password that has spaces)")
        case ("USER"?, _):
            switch (words.count > 1 ? words[1].asciiUppercased : "", words.count) {
            case ("LIST", 2): return .user(.list)
            case ("ADD", 5), ("ADD", 7) where words[5].lowercased() == "--db-role":
                guard let role = Role(name: words[3]) else { throw CommandError(.syntax, "unknown role '\(words[3])': reader, writer or admin") }
                return .user(.add(name: words[2], role: role, password: words[4], databaseRole: words.count == 7 ? words[6] : nil))
            case ("PASSWD", 4): return .user(.passwd(name: words[2], password: words[3]))
            case ("REMOVE", 3): return .user(.remove(name: words[2]))
            default: throw CommandError(.syntax, "usage: \(Verb.user.syntax)")
            }
        default: throw usage
        }
    }

    /// `WHERE predicate`, when present.
    static func whereClause(_ t: inout TokenStream) throws(CommandError) -> Predicate? {
        guard t.consumeWord("WHERE") else { return nil }
        var parser = PredicateParser(tokens: t)
        let predicate = try parser.parse()
        t = parser.tokens
        return predicate
    }

    /// A record: its key (a number or a string), a `#ref`, or `attr=value` pairs (its key
    /// columns, or a unique key), up to SET, INCLUDE or the end.
    private static func address(_ t: inout TokenStream) throws(CommandError) -> RecordAddress {
        switch t.peek.kind {
        // Bytes, not `contains(String)`: Foundation's substring search cost more than the GET.
        case .number(let n) where !n.utf8.contains(where: { $0 == UInt8(ascii: ".") || $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") }):
            t.advance()
            return .key(n)
        case .string(let s) where !t.peek(1).isSymbol("="):
            t.advance()
            return .key(s)
        case .ref(let r):
            t.advance()
            return .pending(r)
        case .word where t.peek(1).isSymbol("="), .string where t.peek(1).isSymbol("="):
            var pairs: [Assignment] = []
            var seen: Set<String> = []
            while t.peek(1).isSymbol("="), !t.peek.isWord("SET"), let name = t.peek.nameText {
                let offset = t.peek.offset
                t.advance()
                t.advance()
                let value = try t.value(after: "'\(name)='")
                guard seen.insert(name.lowercased()).inserted else {
                    throw CommandError(.syntax, "at \(t.column(of: offset)): '\(name)' is given twice")
                }
                pairs.append(Assignment(name: name, value: value, offset: offset))
            }
            return .fields(pairs)
        default:
            throw t.error("expected a record: its id, a #ref, or attr=value naming its key")
        }
    }

    private static func assignments(_ t: inout TokenStream, required: Bool) throws(CommandError) -> [Assignment] {
        var result: [Assignment] = []
        result.reserveCapacity(8)
        // Exact names (`Name` and `name` may be two columns). A few pairs are compared in a
        // row (cheaper than hashing); past 16 a Set, so 40,000 pairs never cost 40,000².
        var seen: Set<String> = []
        while !t.atEnd {
            let offset = t.peek.offset
            let name = try t.name("attr=value")
            guard t.consumeSymbol("=") else { throw t.error("expected '=' after '\(name)'") }
            let value = try t.value(after: "'\(name)='")
            let twice: Bool
            if result.count < 16 {
                twice = result.contains { $0.name == name }
            } else {
                if seen.isEmpty { seen = Set(result.map(\.name)) }
                twice = !seen.insert(name).inserted
            }
            guard !twice else {
                throw CommandError(.syntax, "at \(t.column(of: offset)): '\(name)' is given twice")
            }
            result.append(Assignment(name: name, value: value, offset: offset))
        }
        if required && result.isEmpty { throw t.error("expected at least one attr=value") }
        return result
    }

    /// `INCLUDE rel[.rel] [ORDER BY attr[[c]] [ASC|DESC]] [LIMIT n], ...`.
    private static func include(_ t: inout TokenStream) throws(CommandError) -> ([String], [String: IncludeOrder]) {
        guard t.consumeWord("INCLUDE") else { return ([], [:]) }
        var paths: [String] = []
        var orders: [String: IncludeOrder] = [:]
        repeat {
            let path = try t.name("a relationship to include")
            paths.append(path)
            var order = IncludeOrder()
            if t.consumeWord("ORDER") {
                guard t.consumeWord("BY") else { throw t.error("expected BY after ORDER") }
                order.key = try orderKey(&t, "a key of the included records to order by")
            }
            if t.consumeWord("LIMIT") { order.limit = try t.integer("a limit") }
            if order != IncludeOrder() { orders[path] = order }
        } while t.consumeSymbol(",")
        return (paths, orders)
    }

    /// `AS #name` after INSERT's or UPSERT's entity, if there.
    private static func refName(_ t: inout TokenStream) throws(CommandError) -> String? {
        guard t.consumeWord("AS") else { return nil }
        guard case .ref(let ref) = t.peek.kind else { throw t.error("expected a #ref after AS") }
        t.advance()
        return ref
    }

    /// One sort key, FIND's and an INCLUDE's alike: `path[c] COLLATE "x" ASC|DESC`.
    private static func orderKey(_ t: inout TokenStream, _ what: String) throws(CommandError) -> OrderKey {
        let offset = t.peek.offset
        let path = try t.name(what)
        try PredicateParser.checkPath(path, at: t.column(of: offset))
        var caseInsensitive = false
        if case .symbol(let options) = t.peek.kind, options.hasPrefix("[") {
            guard options == "[c]" else { throw t.error("ORDER BY takes [c] (case-insensitive), not \(options)") }
            caseInsensitive = true
            t.advance()
        }
        var collation: String?
        if t.consumeWord("COLLATE") { collation = try t.name("a collation's name (\"de-x-icu\")") }
        var ascending = true
        if t.consumeWord("DESC") { ascending = false } else { _ = t.consumeWord("ASC") }
        var key = OrderKey(path: path, ascending: ascending, offset: offset, caseInsensitive: caseInsensitive)
        key.collation = collation
        return key
    }

    /// ` (did you mean FIND?)` for a near miss.
    static func suggestion(for word: String) -> String {
        guard word.count <= 12 else { return "" }
        let upper = word.uppercased()
        let best = Verb.allCases.map { ($0, editDistance(upper, $0.rawValue)) }.min { $0.1 < $1.1 }
        guard let best, best.1 <= 2 else { return "" }
        return " (did you mean \(best.0.rawValue)?)"
    }

    static func editDistance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty { return b.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var current = [i] + Array(repeating: 0, count: b.count)
            for j in stride(from: 1, through: b.count, by: 1) {
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = current
        }
        return previous[b.count]
    }
}
