import Postgres
import RecordsProtocol

/// Who a session's database work runs as, for PostgreSQL's row-level security: two settings
/// that policies read (`current_setting('records.user', true)`, `records.role`) and, when the
/// user is mapped to one, a PostgreSQL role (`SET ROLE`). Policies decide; recordsd only says
/// who is asking.
///
/// Applied on the leased connection before each job runs, as session settings, outside any
/// transaction: reads without pending changes run without one, and a setting local to a
/// transaction would cost them a BEGIN and an end. The connection remembers the identity it
/// carries (`Connection.settingsTag`) so a job of the same identity sends nothing; a fresh
/// connection carries none, so a reconnect applies it again. (recordsd needs session pooling
/// from anything between it and PostgreSQL: its pool's connections keep settings, prepared
/// statements and, here, identities.)
public struct Identity: Sendable, Hashable {
    /// The signed-in user's name; empty without one.
    public let user: String
    /// recordsd's role (`reader`, `writer`, `admin`); empty before sign-in.
    public let role: String
    /// The PostgreSQL role the user's work runs as (`USER ADD ... --db-role R`); nil: the
    /// server's own login role.
    public let databaseRole: String?

    public init(user: String, role: String, databaseRole: String? = nil) {
        self.user = user
        self.role = role
        self.databaseRole = databaseRole
        tag = "\(user)\u{0}\(role)\u{0}\(databaseRole ?? "")"
    }

    /// Sessions where no authentication is in force (loopback, no users) and the server's own
    /// work: every right, as before identities existed (policies let `records.role = 'admin'`
    /// see everything).
    public static let server = Identity(user: "", role: Role.admin.name)
    /// A session that has not signed in: it runs only AUTH, which reads the server's own schema.
    public static let anonymous = Identity(user: "", role: "")

    /// The identity as one string (the connection's `settingsTag`, a grouping key).
    /// Made once: every database step compares it.
    public let tag: String
}

extension Connection {
    /// Makes the connection's next statements run as `identity`; nothing is sent when it
    /// already does. A connection inside a transaction has it rolled back first: a setting
    /// made in a transaction that later rolls back would be undone with it.
    public func assume(_ identity: Identity) throws(PostgresError) {
        // A database role is taken again every time: one dropped since (its OID dangling on the
        // connection) must refuse clearly, not fail later as another error.
        guard settingsTag != identity.tag || identity.databaseRole != nil else { return }
        settingsTag = nil
        if inTransaction { try execute("ROLLBACK") }
        // One statement: when the role cannot be taken, no setting changes either.
        try query("SELECT set_config('role', $1, false), set_config('records.user', $2, false), set_config('records.role', $3, false)",
                  [identity.databaseRole ?? "none", identity.user, identity.role])
        settingsTag = identity.tag
    }
}
