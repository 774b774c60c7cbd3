import RecordsProtocol
/// A record named in a command: a stored key (as typed, for a single-column key), a pending
/// `#ref`, or `attr=value` pairs naming its key columns or a unique key (`project=3
/// employee=7`, `uid="m1"`).
public enum RecordAddress: Equatable, Sendable, CustomStringConvertible {
    case key(String)
    case pending(String)
    case fields([Assignment])

    public var description: String {
        switch self {
        case .key(let id): id
        case .pending(let ref): "#" + ref
        case .fields(let pairs): pairs.map { "\($0.name)=\($0.value)" }.joined(separator: " ")
        }
    }
}

/// `attr=value` as typed; checked against the model when the command runs.
public struct Assignment: Equatable, Sendable {
    public var name: String
    public var value: Value
    public var offset: Int
}

/// How SAVE resolves records that another session changed since this unit read them
/// (Core Data's merge policies).
public enum MergePolicy: String, Equatable, Sendable {
    /// Fail with CONFLICT (the default).
    case fail
    /// This unit's values win (last writer wins): `SAVE FORCE`.
    case force
    /// The database wins for the fields both sides changed: `SAVE THEIRS`.
    case theirs
    /// Fields only one side changed are combined; a field both changed fails: `SAVE MERGE`.
    case merge
}

public struct OrderKey: Equatable, Sendable {
    public var path: String
    public var ascending: Bool
    public var offset: Int
    /// `ORDER BY name[c]`: letters compared without case (text keys).
    public var caseInsensitive = false
    /// `ORDER BY name COLLATE "de-x-icu"`: a collation of the database's (text keys).
    public var collation: String?

    public init(path: String, ascending: Bool, offset: Int, caseInsensitive: Bool = false) {
        self.path = path
        self.ascending = ascending
        self.offset = offset
        self.caseInsensitive = caseInsensitive
    }
}

/// How one included to-many relationship's records come: ordered by one of their attributes,
/// at most `limit` of them.
public struct IncludeOrder: Equatable, Sendable {
    /// Any key FIND's own ORDER BY takes: an attribute, a to-one relationship or its column, a
    /// key path through to-one relationships, `@count`; with `[c]` or COLLATE.
    public var key: OrderKey?
    public var limit: Int?
}

public struct FetchRequest: Equatable, Sendable {
    public var entity: String
    public var predicate: Predicate?
    public var order: [OrderKey] = []
    public var limit: Int?
    public var offset: Int?
    public var include: [String] = []
    /// `INCLUDE employees ORDER BY last_name LIMIT 5`: a to-many include's order and size, by
    /// its path.
    public var includeOrder: [String: IncludeOrder] = [:]
    /// A keyset cursor from the previous page's reply.
    public var after: String?
    /// `SELECT [DISTINCT] path, ...`: only these values (key paths through to-one
    /// relationships), each record's object keyed by the paths as typed.
    public var select: [String] = []
    public var distinct = false
}

/// USER subcommands (admin).
public enum UserCommand: Equatable, Sendable {
    case list
    case add(name: String, role: Role, password: String, databaseRole: String? = nil)
    case passwd(name: String, password: String)
    case remove(name: String)
}

/// A parsed request line.
public enum Command: Equatable, Sendable {
    case help(String?)
    case ping(String?)
    case quit
    case info
    /// `FORMAT JSON`: data lines of the descriptive verbs as JSON objects.
    case format(json: Bool)
    case entities
    case describe(String)
    case insert(entity: String, ref: String?, values: [Assignment])
    case update(entity: String, id: RecordAddress, values: [Assignment])
    case delete(entity: String, id: RecordAddress)
    /// `UPDATE entity WHERE predicate SET attr=value ...`; `text` is the line as typed.
    case updateWhere(entity: String, predicate: Predicate, values: [Assignment], text: String)
    /// `DELETE entity WHERE predicate`.
    case deleteWhere(entity: String, predicate: Predicate, text: String)
    case upsert(entity: String, ref: String?, key: [String], values: [Assignment])
    /// `CHANGES [COUNT]`.
    case changes(countOnly: Bool)
    /// `SAVE [FORCE|THEIRS|MERGE] [KEY k]`.
    case save(MergePolicy, key: String?)
    case rollback
    case nest
    case merge
    case discard
    case get(entity: String, id: RecordAddress, include: [String], includeOrder: [String: IncludeOrder] = [:])
    case find(FetchRequest)
    case count(entity: String, predicate: Predicate?, estimate: Bool)
    /// EXPLAIN FIND / COUNT / GET: the SQL, its parameters, and PostgreSQL's plan.
    case explain(FetchRequest)
    case aggregate(AggregateRequest)
    case explainAggregate(AggregateRequest)
    case watch(entity: String, predicate: Predicate?)
    case unwatch(entity: String?)
    case export(FetchRequest)
    case importData(entity: String, columns: [String]?)
    case startTLS
    case auth(name: String, password: String)
    case user(UserCommand)
    /// `RESUME token`: a handed-off session.
    case resume(token: String)
    /// `CANCEL KEY`: nil; `CANCEL s12 key`: the session and its key.
    case cancel(session: Int?, key: String?)

    /// It adds to, or reshapes, the pending changes of the unit of work.
    public var changesTheUnit: Bool {
        switch self {
        case .insert, .update, .updateWhere, .delete, .deleteWhere, .upsert, .nest, .merge, .discard: true
        default: false
        }
    }

    public var verb: Verb {
        switch self {
        case .help: .help
        case .ping: .ping
        case .quit: .quit
        case .info: .info
        case .format: .format
        case .entities: .entities
        case .describe: .describe
        case .insert: .insert
        case .update, .updateWhere: .update
        case .delete, .deleteWhere: .delete
        case .upsert: .upsert
        case .changes: .changes
        case .save: .save
        case .rollback: .rollback
        case .nest: .nest
        case .merge: .merge
        case .discard: .discard
        case .get: .get
        case .find: .find
        case .aggregate: .aggregate
        case .explainAggregate: .explain
        case .count: .count
        case .explain: .explain
        case .watch: .watch
        case .unwatch: .unwatch
        case .export: .export
        case .importData: .import
        case .startTLS: .starttls
        case .auth: .auth
        case .user: .user
        case .cancel: .cancel
        case .resume: .resume
        }
    }
}
