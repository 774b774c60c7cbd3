/// The verbs of the line protocol. Everything known about one is in `Verb.table`, read by the
/// server (parser dispatch, role checks, read batching, HELP) and by the CLI (completion,
/// script pipelining): one table, no switch elsewhere that repeats it.
public enum Verb: String, CaseIterable, Sendable {
    case help = "HELP", ping = "PING", quit = "QUIT", info = "INFO", format = "FORMAT"
    case entities = "ENTITIES", describe = "DESCRIBE"
    case insert = "INSERT", update = "UPDATE", delete = "DELETE", upsert = "UPSERT"
    case changes = "CHANGES", save = "SAVE", rollback = "ROLLBACK"
    case nest = "NEST", merge = "MERGE", discard = "DISCARD"
    case get = "GET", find = "FIND", count = "COUNT", aggregate = "AGGREGATE", explain = "EXPLAIN"
    case watch = "WATCH", unwatch = "UNWATCH", export = "EXPORT", `import` = "IMPORT"
    case starttls = "STARTTLS", auth = "AUTH", user = "USER", resume = "RESUME", cancel = "CANCEL"

    /// This verb's facts.
    /// Read for every line (its role, whether it carries a secret): from an array in the
    /// order of the cases, not by hashing.
    public var facts: VerbFacts { Self.factsInOrder[Self.inOrder.firstIndex(of: self)!] }
    private static let inOrder = allCases
    private static let factsInOrder = allCases.map { table[$0]! }
    public var syntax: String { facts.syntax }
    public var summary: String { facts.summary }
    public var example: String { facts.example }
    /// The role it needs; nil for the verbs open before sign-in.
    public var requiredRole: Role? { facts.role }

    /// The longest verb, in bytes: a longer first word is no verb (checked before parsing).
    public static let longest = allCases.map(\.rawValue.utf8.count).max()!

    /// The verb a line starts with, read without parsing the rest (before sign-in, only this
    /// is looked at).
    public static func of(_ line: String) -> Verb? {
        // Every verb is ASCII letters only, at most `longest` (9) of them: the first word, case
        // folded, packs into 5 bits a letter, compared with each verb's code. No string made;
        // it runs several times for every line.
        guard let code = line.utf8.withContiguousStorageIfAvailable({ code(of: $0) }) ?? code(of: Array(line.utf8)) else { return nil }
        return codes.first { $0.code == code }?.verb
    }

    /// The first word's code; nil when it cannot be a verb.
    private static func code<Bytes: Collection<UInt8>>(of bytes: Bytes) -> UInt64? {
        var code: UInt64 = 0
        var letters = 0
        var started = false
        for byte in bytes {
            if byte == 32 || byte == 9 {
                if started { break }
                continue
            }
            started = true
            let upper = byte >= 97 && byte <= 122 ? byte - 32 : byte
            guard upper >= 65 && upper <= 90, letters < longest else { return nil }
            code = code << 5 | UInt64(upper - 64)
            letters += 1
        }
        return letters == 0 ? nil : code
    }

    private static let codes: [(code: UInt64, verb: Verb)] = allCases.map { (code(of: Array($0.rawValue.utf8))!, $0) }

    public static let table: [Verb: VerbFacts] = [
        .help: VerbFacts(
            syntax: "HELP [verb]",
            summary: "list the verbs, or explain one",
            example: "HELP INSERT",
            role: nil, access: .session, batchable: false, barrier: false,
            completes: .verb, keywords: []),
        .ping: VerbFacts(
            syntax: "PING [message]",
            summary: "check the connection; replies +OK PONG (or the message)",
            example: "PING",
            role: nil, access: .session, batchable: false, barrier: false,
            completes: .nothing, keywords: []),
        .quit: VerbFacts(
            syntax: "QUIT",
            summary: "close the session; pending changes are dropped",
            example: "QUIT",
            role: nil, access: .session, batchable: false, barrier: true,
            completes: .nothing, keywords: []),
        .format: VerbFacts(
            syntax: "FORMAT TEXT | FORMAT JSON",
            summary: "how ENTITIES, DESCRIBE, INFO, EXPLAIN and SAVE's ids print: aligned text for people (the default), or one JSON object a line for programs",
            example: "FORMAT JSON",
            role: .reader, access: .session, batchable: false, barrier: false,
            completes: .nothing, keywords: ["TEXT", "JSON"]),
        .info: VerbFacts(
            syntax: "INFO",
            summary: "server version, uptime, sessions, database, pool, and this session's unit of work",
            example: "INFO",
            role: .reader, access: .reads, batchable: false, barrier: false,
            completes: .nothing, keywords: []),
        .entities: VerbFacts(
            syntax: "ENTITIES",
            summary: "the served entities with their attribute and relationship counts",
            example: "ENTITIES",
            role: .reader, access: .reads, batchable: false, barrier: false,
            completes: .nothing, keywords: []),
        .describe: VerbFacts(
            syntax: "DESCRIBE entity",
            summary: "an entity's attributes (type, required, default, unique) and relationships",
            example: "DESCRIBE employee",
            role: .reader, access: .reads, batchable: false, barrier: false,
            completes: .entity, keywords: []),
        .insert: VerbFacts(
            syntax: "INSERT entity [AS #ref] attr=value ...",
            summary: "add a pending insert; replies with its #ref for later commands",
            example: "INSERT employee first_name=\"John\" last_name=\"Lim\" gender=1 department=#sales",
            role: .writer, access: .edits, batchable: false, barrier: false,
            completes: .entity, keywords: ["AS"]),
        .update: VerbFacts(
            syntax: "UPDATE entity record [SET] attr=value ... | UPDATE entity WHERE predicate SET attr=value ...",
            summary: "add a pending update of a record, or of the records a predicate matches at SAVE; a record: id, #ref, key=value ..., or unique_attr=value",
            example: "UPDATE employee 42 age=31",
            role: .writer, access: .edits, batchable: false, barrier: false,
            completes: .entity, keywords: ["WHERE", "SET"]),
        .delete: VerbFacts(
            syntax: "DELETE entity record | DELETE entity WHERE predicate",
            summary: "add a pending delete of a record, or of the records a predicate matches at SAVE; replies with what its delete rules will do",
            example: "DELETE memo uid=\"m1\"",
            role: .writer, access: .edits, batchable: false, barrier: false,
            completes: .entity, keywords: ["WHERE"]),
        .upsert: VerbFacts(
            syntax: "UPSERT entity [AS #ref] ON unique_attr[, attr] attr=value ...",
            summary: "insert, or update the record with the same unique key (seeding); #ref names it either way",
            example: "UPSERT game ON name name=\"Chess\"",
            role: .writer, access: .edits, batchable: false, barrier: false,
            completes: .entity, keywords: ["AS", "ON"]),
        .changes: VerbFacts(
            syntax: "CHANGES [COUNT]",
            summary: "list the pending inserts, updates (old -> new) and deletes; COUNT: only how many, as one JSON line (for prompts and programs)",
            example: "CHANGES COUNT",
            role: .writer, access: .session, batchable: false, barrier: false,
            completes: .nothing, keywords: ["COUNT"]),
        .save: VerbFacts(
            syntax: "SAVE [FORCE|THEIRS|MERGE] [KEY k]",
            summary: "write every pending change in one transaction; on conflict FORCE: yours win, THEIRS: the database wins for fields both changed, MERGE: combine fields only one side changed; KEY k: a retry with the same key answers what the first save did, and a key a save of other changes used answers ALREADY_SAVED (that save is done: never save it again under a new key). A key is \(KeyToken.grammar)",
            example: "SAVE",
            role: .writer, access: .writes, batchable: false, barrier: true,
            completes: .nothing, keywords: ["FORCE", "THEIRS", "MERGE", "KEY"]),
        .rollback: VerbFacts(
            syntax: "ROLLBACK",
            summary: "drop every pending change, nested scratchpads included",
            example: "ROLLBACK",
            role: .writer, access: .session, batchable: false, barrier: false,
            completes: .nothing, keywords: []),
        .nest: VerbFacts(
            syntax: "NEST",
            summary: "open a child scratchpad on top of the unit of work",
            example: "NEST",
            role: .writer, access: .session, batchable: false, barrier: false,
            completes: .nothing, keywords: []),
        .merge: VerbFacts(
            syntax: "MERGE",
            summary: "fold the innermost scratchpad into its parent",
            example: "MERGE",
            role: .writer, access: .session, batchable: false, barrier: false,
            completes: .nothing, keywords: []),
        .discard: VerbFacts(
            syntax: "DISCARD",
            summary: "drop the innermost scratchpad and its changes",
            example: "DISCARD",
            role: .writer, access: .session, batchable: false, barrier: false,
            completes: .nothing, keywords: []),
        .get: VerbFacts(
            syntax: "GET entity record [INCLUDE rel[.rel], ...]",
            summary: "one record by id, #ref, key columns or a unique key, as seen with this unit's pending changes",
            example: "GET memo uid=\"m1\" INCLUDE color",
            role: .reader, access: .reads, batchable: true, barrier: false,
            completes: .entity, keywords: ["INCLUDE"]),
        .find: VerbFacts(
            syntax: "FIND entity [SELECT [DISTINCT] path, ...] [WHERE predicate] [ORDER BY key[[c]] [COLLATE \"name\"] [ASC|DESC], ...] [LIMIT n] [OFFSET n | AFTER cursor] [INCLUDE rel[.rel] [ORDER BY attr [DESC]] [LIMIT n], ...]",
            summary: "records matching a predicate (== != < <= > >= BEGINSWITH ENDSWITH CONTAINS LIKE MATCHES IN BETWEEN, [c] [d], field to field, ANY ALL NONE, @count @sum @avg @min @max, SUBQUERY), one JSON object a line; with LIMIT, a cursor for the next page; SELECT: only some values",
            example: "FIND employee WHERE age > 30 AND department.name == \"Sales\" ORDER BY last_name LIMIT 10",
            role: .reader, access: .reads, batchable: true, barrier: false,
            completes: .entity, keywords: ["SELECT", "DISTINCT", "WHERE", "ORDER", "BY", "ASC", "DESC", "LIMIT", "OFFSET", "AFTER", "INCLUDE", "AND", "OR", "NOT", "IN", "BEGINSWITH", "ENDSWITH", "CONTAINS", "LIKE", "MATCHES", "nil"]),
        .aggregate: VerbFacts(
            syntax: "AGGREGATE entity fn(path) [AS name], ... [WHERE predicate] [GROUP BY path, ...] [HAVING fn(path) op value [AND ...]] [ORDER BY name [ASC|DESC], ...] [LIMIT n]",
            summary: "count(), count(path), sum, avg, min and max over the matching records, per group, one JSON object a group; pending changes included",
            example: "AGGREGATE employee count() avg(age) GROUP BY department.name HAVING count() > 1 ORDER BY avg_age DESC",
            role: .reader, access: .reads, batchable: false, barrier: false,
            completes: .entity, keywords: ["AS", "WHERE", "GROUP", "BY", "HAVING", "ORDER", "ASC", "DESC", "LIMIT", "AND", "OR", "NOT"]),
        .count: VerbFacts(
            syntax: "COUNT entity [WHERE predicate] [ESTIMATE]",
            summary: "how many records match; ESTIMATE asks the planner instead of counting",
            example: "COUNT employee WHERE department == nil",
            role: .reader, access: .reads, batchable: true, barrier: false,
            completes: .entity, keywords: ["WHERE", "ESTIMATE", "AND", "OR", "NOT", "IN", "nil"]),
        .explain: VerbFacts(
            syntax: "EXPLAIN FIND ... | EXPLAIN COUNT ... | EXPLAIN AGGREGATE ...",
            summary: "the SQL and parameters a FIND, COUNT or AGGREGATE runs, and PostgreSQL's plan for it",
            example: "EXPLAIN FIND employee WHERE department.name BEGINSWITH[c] \"sa\"",
            role: .reader, access: .reads, batchable: true, barrier: false,
            completes: .verb, keywords: ["FIND", "COUNT", "AGGREGATE"]),
        .watch: VerbFacts(
            syntax: "WATCH entity [WHERE predicate]",
            summary: "push '! entity id inserted|updated|deleted' lines after every committed change, by anyone",
            example: "WATCH employee WHERE department.name == \"Sales\"",
            role: .reader, access: .reads, batchable: false, barrier: false,
            completes: .entity, keywords: ["WHERE"]),
        .unwatch: VerbFacts(
            syntax: "UNWATCH [entity]",
            summary: "stop the pushed changes of one entity, or of all",
            example: "UNWATCH employee",
            role: .reader, access: .session, batchable: false, barrier: false,
            completes: .entity, keywords: []),
        .export: VerbFacts(
            syntax: "EXPORT entity [WHERE predicate] [ORDER BY key[[c]] [COLLATE \"name\"] [ASC|DESC], ...]",
            summary: "the records as CSV with a header line; lines starting with . + - ! get one more . in front",
            example: "EXPORT employee WHERE age > 30 ORDER BY id",
            role: .reader, access: .reads, batchable: false, barrier: false,
            completes: .entity, keywords: ["WHERE", "ORDER", "BY", "ASC", "DESC"]),
        .`import`: VerbFacts(
            syntax: "IMPORT entity [(column, ...)], then CSV lines, then a line with a single .",
            summary: "load CSV (a header line first unless columns are given) in one transaction: all rows or none",
            example: "IMPORT game",
            role: .writer, access: .writes, batchable: false, barrier: true,
            completes: .entity, keywords: []),
        .starttls: VerbFacts(
            syntax: "STARTTLS",
            summary: "switch this connection to TLS: after +OK, the client starts the TLS handshake; what it sent after STARTTLS before that is dropped",
            example: "STARTTLS",
            role: nil, access: .session, batchable: false, barrier: true,
            completes: .nothing, keywords: []),
        .auth: VerbFacts(
            syntax: "AUTH name password",
            summary: "sign in; roles: reader (reads), writer (+ edits and SAVE), admin (+ USER)",
            example: "AUTH alice \"correct horse battery\"",
            role: nil, access: .writes, batchable: false, barrier: true,
            completes: .nothing, keywords: [], carriesSecret: true),
        .user: VerbFacts(
            syntax: "USER LIST | USER ADD name role password [--db-role R] | USER PASSWD name password | USER REMOVE name",
            summary: "manage users (admin): roles reader, writer, admin; --db-role: the PostgreSQL role the user's work runs as (row-level security)",
            example: "USER ADD bob writer \"s3cret-pass\"",
            role: .admin, access: .writes, batchable: false, barrier: true,
            completes: .nothing, keywords: ["LIST", "ADD", "PASSWD", "REMOVE", "reader", "writer", "admin"], carriesSecret: true),
        .resume: VerbFacts(
            syntax: "RESUME token",
            summary: "take over the session a stopped server handed off (its pending changes, scratchpads, watches), with the token its handoff notice gave; once, by the same user",
            example: "RESUME rt3f9c0e5a7b21d4c8e6f0a9b3c5d7e1f2",
            role: .reader, access: .writes, batchable: false, barrier: true,
            completes: .nothing, keywords: [], carriesSecret: true),
        .cancel: VerbFacts(
            syntax: "CANCEL KEY | CANCEL session key",
            summary: "CANCEL KEY: this session's cancel key; CANCEL s12 KEY, sent on another connection (no sign-in needed): stop the command session s12 runs now (its statement is cancelled in PostgreSQL; it answers -ERR CANCELLED, its unit of work as it was)",
            example: "CANCEL KEY",
            role: nil, access: .session, batchable: false, barrier: false,
            completes: .nothing, keywords: ["KEY"], carriesSecret: true),
    ]
}

/// What is known about a verb.
public struct VerbFacts: Sendable {
    /// What a verb touches, which decides where it runs and what it may change.
    public enum Access: Sendable, Equatable {
        /// The session alone (its unit of work, its watches); no database.
        case session
        /// Reads PostgreSQL, seeing the unit's pending changes.
        case reads
        /// Adds pending changes (reading PostgreSQL to check them).
        case edits
        /// Writes PostgreSQL (SAVE, IMPORT, USER) or signs in.
        case writes
    }

    /// What may follow the verb on the line, for completion.
    public enum Completes: Sendable, Equatable {
        case nothing, entity, verb
    }

    public var syntax: String
    public var summary: String
    public var example: String
    /// The role it needs; nil: open before sign-in.
    public var role: Role?
    public var access: Access
    /// Consecutive ones from one session run as one pool job.
    public var batchable: Bool
    /// A script sends it alone, once everything before it succeeded: its effect must not
    /// follow a failure.
    public var barrier: Bool
    public var completes: Completes
    /// The clause words it takes, for completion.
    public var keywords: [String]
    /// Its line may hold a password: a client never keeps it (shell history).
    public var carriesSecret = false
}
