/// The command table as data: each verb's syntax, summary and example, from which HELP is
/// written, and the role it needs.
public enum Verb: String, CaseIterable, Sendable {
    case help = "HELP", ping = "PING", quit = "QUIT", info = "INFO"
    case entities = "ENTITIES", describe = "DESCRIBE"
    case insert = "INSERT", update = "UPDATE", delete = "DELETE", upsert = "UPSERT"
    case changes = "CHANGES", save = "SAVE", rollback = "ROLLBACK"
    case nest = "NEST", merge = "MERGE", discard = "DISCARD"
    case get = "GET", find = "FIND", count = "COUNT", explain = "EXPLAIN"
    case auth = "AUTH", user = "USER"

    public var syntax: String {
        switch self {
        case .help: "HELP [verb]"
        case .ping: "PING [message]"
        case .quit: "QUIT"
        case .info: "INFO"
        case .entities: "ENTITIES"
        case .describe: "DESCRIBE entity"
        case .insert: "INSERT entity [AS #ref] attr=value ..."
        case .update: "UPDATE entity id|#ref attr=value ..."
        case .delete: "DELETE entity id|#ref"
        case .upsert: "UPSERT entity ON unique_attr attr=value ..."
        case .changes: "CHANGES"
        case .save: "SAVE [FORCE|THEIRS|MERGE]"
        case .rollback: "ROLLBACK"
        case .nest: "NEST"
        case .merge: "MERGE"
        case .discard: "DISCARD"
        case .get: "GET entity id|#ref [INCLUDE rel[.rel], ...]"
        case .find: "FIND entity [WHERE predicate] [ORDER BY key [ASC|DESC], ...] [LIMIT n] [OFFSET n | AFTER cursor] [INCLUDE rel[.rel], ...]"
        case .count: "COUNT entity [WHERE predicate] [ESTIMATE]"
        case .explain: "EXPLAIN FIND ... | EXPLAIN COUNT ..."
        case .auth: "AUTH name password"
        case .user: "USER LIST | USER ADD name role password | USER PASSWD name password | USER REMOVE name"
        }
    }

    public var summary: String {
        switch self {
        case .help: "list the verbs, or explain one"
        case .ping: "check the connection; replies +OK PONG (or the message)"
        case .quit: "close the session; pending changes are dropped"
        case .info: "server version, uptime, sessions, database, pool, and this session's unit of work"
        case .entities: "the served entities with their attribute and relationship counts"
        case .describe: "an entity's attributes (type, required, default, unique) and relationships"
        case .insert: "add a pending insert; replies with its #ref for later commands"
        case .update: "add a pending update; a stored record is read first and its version kept"
        case .delete: "add a pending delete; replies with what its delete rules will do on SAVE"
        case .upsert: "insert, or update the record with the same unique key (seeding)"
        case .changes: "list the pending inserts, updates (old -> new) and deletes"
        case .save: "write every pending change in one transaction; on conflict FORCE: yours win, THEIRS: the database wins for fields both changed, MERGE: combine fields only one side changed"
        case .rollback: "drop every pending change, nested scratchpads included"
        case .nest: "open a child scratchpad on top of the unit of work"
        case .merge: "fold the innermost scratchpad into its parent"
        case .discard: "drop the innermost scratchpad and its changes"
        case .get: "one record by id, as seen with this unit's pending changes"
        case .find: "records matching a predicate, one JSON object a line; with LIMIT, a cursor for the next page"
        case .count: "how many records match; ESTIMATE asks the planner instead of counting"
        case .explain: "the SQL and parameters a FIND or COUNT runs, and PostgreSQL's plan for it"
        case .auth: "sign in; roles: reader (reads), writer (+ edits and SAVE), admin (+ USER)"
        case .user: "manage users (admin): roles reader, writer, admin"
        }
    }

    public var example: String {
        switch self {
        case .help: "HELP INSERT"
        case .ping: "PING"
        case .quit: "QUIT"
        case .info: "INFO"
        case .entities: "ENTITIES"
        case .describe: "DESCRIBE employee"
        case .insert: "INSERT employee first_name=\"John\" last_name=\"Lim\" gender=1 department=#sales"
        case .update: "UPDATE employee 42 age=31"
        case .delete: "DELETE department 3"
        case .upsert: "UPSERT game ON name name=\"Chess\""
        case .changes: "CHANGES"
        case .save: "SAVE"
        case .rollback: "ROLLBACK"
        case .nest: "NEST"
        case .merge: "MERGE"
        case .discard: "DISCARD"
        case .get: "GET department 3 INCLUDE employees"
        case .find: "FIND employee WHERE age > 30 AND department.name == \"Sales\" ORDER BY last_name LIMIT 10"
        case .count: "COUNT employee WHERE department == nil"
        case .explain: "EXPLAIN FIND employee WHERE department.name BEGINSWITH[c] \"sa\""
        case .auth: "AUTH alice \"correct horse battery\""
        case .user: "USER ADD bob writer \"s3cret-pass\""
        }
    }
}
