/// An error from libpq or from the PostgreSQL server, with the diagnostic fields libpq reports.
///
/// `description` is safe to show to a client; `debugDescription` adds the detail and hint,
/// which may quote row values.
public struct PostgresError: Error, CustomStringConvertible, CustomDebugStringConvertible, Sendable {
    public enum Kind: Sendable {
        /// Could not connect, or the connection broke: PostgreSQL is unavailable.
        case connection
        /// The server reported an error for a statement.
        case server
        /// libpq returned something this layer did not expect.
        case unexpected
    }

    public var kind: Kind
    public var sqlState: SQLState?
    public var message: String
    public var detail: String?
    public var hint: String?
    /// The schema of the table the error is about (a table's name alone is ambiguous).
    public var schema: String?
    public var table: String?
    public var column: String?
    public var constraint: String?
    /// Where the error happened (e.g. "COPY employee, line 5000").
    public var context: String?

    public init(
        kind: Kind, sqlState: SQLState? = nil, message: String, detail: String? = nil,
        hint: String? = nil, schema: String? = nil, table: String? = nil, column: String? = nil, constraint: String? = nil
    ) {
        self.kind = kind
        self.sqlState = sqlState
        self.message = message
        self.detail = detail
        self.hint = hint
        self.schema = schema
        self.table = table
        self.column = column
        self.constraint = constraint
    }

    /// True when retrying later (after PostgreSQL comes back) could succeed.
    public var isUnavailable: Bool {
        kind == .connection || (sqlState?.meansUnavailable ?? false)
    }

    public var description: String {
        if let sqlState { return "\(message) (SQLSTATE \(sqlState))" }
        return message
    }

    public var debugDescription: String {
        var text = description
        if let detail { text += " detail: \(detail)" }
        if let hint { text += " hint: \(hint)" }
        return text
    }
}
