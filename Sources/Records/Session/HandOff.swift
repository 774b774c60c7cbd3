import Foundation
import Postgres

/// What a session hands to the next server when this one stops: its unit of work (every
/// nested scratchpad, the keys `#ref`s were shown, the versions it read), what it watches, its
/// reply format, and a SAVE whose COMMIT got no answer. Who it belongs to is kept beside it
/// (`records.handoff.owner`): only that user redeems it.
public struct SessionState: Codable, Sendable {
    /// Bumped when the coding changes: a server refuses a state it does not know.
    public static let currentFormat = 1

    public struct Watched: Codable, Sendable, Equatable {
        public var entity: String
        public var predicate: Predicate?
    }

    /// A SAVE whose COMMIT got no answer: the next SAVE still asks about it first, on any server.
    public struct Uncertain: Codable, Sendable {
        var xid: String
        var mark: Int64
        var ifCommitted: Reply
        /// How long ago it happened, seconds (uptime does not cross machines).
        var ageSeconds: Double
    }

    public var format = Self.currentFormat
    public var unit: UnitOfWork
    public var watches: [Watched]
    public var jsonReplies: Bool
    public var uncertain: Uncertain?

    /// Pending changes as the prompt counts them (the innermost scratchpad).
    public var pendingCount: Int { unit.current.count }
}

/// Sessions handed from a stopping server to any other, through `records.handoff`: a row a
/// session, found by the SHA-256 of its token (the token itself is never stored), redeemed
/// once, by its owner, before it expires.
public enum HandOff {
    /// Seconds a handed-off session waits for its RESUME (`--resume-ttl`).
    public static let defaultTTL = 900
    /// Expired rows are kept this long (so a late RESUME hears "expired", not "unknown").
    static let expiredKeptMinutes = 60

    /// A fresh token: `rt` and 128 random bits in hex (the system's CSPRNG, getrandom(2)).
    public static func newToken() -> String {
        var generator = SystemRandomNumberGenerator()
        let high = generator.next() as UInt64, low = generator.next() as UInt64
        return "rt" + hex(high) + hex(low)
    }

    private static func hex(_ value: UInt64) -> String {
        let digits = String(value, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// Whether `text` has a token's shape (checked before anything is asked of PostgreSQL).
    public static func isToken(_ text: String) -> Bool {
        text.utf8.count == 34 && text.hasPrefix("rt") && text.utf8.dropFirst(2).allSatisfy { (48...57).contains($0) || (97...102).contains($0) }
    }

    public static func encode(_ state: SessionState) throws -> String {
        String(decoding: try JSONEncoder().encode(state), as: UTF8.self)
    }

    public static func decode(_ text: String) throws -> SessionState {
        try JSONDecoder().decode(SessionState.self, from: Data(text.utf8))
    }

    /// One session to store.
    public struct Entry: Sendable {
        public var token: String
        public var owner: String?
        public var state: String
        public var pending: Int
        public init(token: String, owner: String?, state: String, pending: Int) {
            self.token = token
            self.owner = owner
            self.state = state
            self.pending = pending
        }
    }

    static let storeSQL = """
        INSERT INTO records.handoff (token_hash, owner, state, pending, expires_at)
        SELECT sha256(convert_to(t, 'UTF8')), o, s::jsonb, p, now() + make_interval(secs => $5::int)
        FROM unnest($1::text[], $2::text[], $3::text[], $4::int[]) AS u(t, o, s, p)
        """

    /// Stores the entries, a few hundred a statement, in one transaction.
    public static func store(_ entries: [Entry], ttl: Int, _ connection: Connection) throws {
        guard !entries.isEmpty else { return }
        try connection.transaction {
            var start = 0
            while start < entries.count {
                let chunk = entries[start..<min(start + 500, entries.count)]
                try connection.query(storeSQL, [SQL.arrayLiteral(chunk.map(\.token)), SQL.arrayLiteral(chunk.map(\.owner)),
                                                SQL.arrayLiteral(chunk.map(\.state)), SQL.arrayLiteral(chunk.map { String($0.pending) }),
                                                String(ttl)])
                start += chunk.count
            }
        }
    }

    /// Spends a live token of `owner` (nil: a session that did not sign in), in one statement.
    static let redeemSQL = """
        DELETE FROM records.handoff
        WHERE token_hash = sha256(convert_to($1, 'UTF8')) AND expires_at > now() AND owner IS NOT DISTINCT FROM $2
        RETURNING state::text, round(extract(epoch FROM now() - created_at))::int
        """
    /// Why a token was not spent.
    static let explainSQL = """
        SELECT owner IS NOT DISTINCT FROM $2, expires_at > now()
        FROM records.handoff WHERE token_hash = sha256(convert_to($1, 'UTF8'))
        """

    /// The state `token` holds, spent; refused clearly when it is unknown or spent, expired,
    /// or another user's (that one is left for its owner).
    static func redeem(_ token: String, owner: String?, _ connection: Connection) throws -> (state: String, secondsAgo: Int) {
        let spent = try connection.query(redeemSQL, [token, owner])
        if spent.rowCount == 1, let state = spent.string(0, 0) {
            return (state, Int(spent.string(0, 1) ?? "0") ?? 0)
        }
        let why = try connection.query(explainSQL, [token, owner])
        guard why.rowCount == 1 else {
            throw CommandError(.notFound, "no session to resume with this token: it is unknown, or was already resumed (a token works once)")
        }
        guard why.string(0, 0) == "t" else {
            throw CommandError(.forbidden, "this token belongs to another user: AUTH as the user whose session it was")
        }
        throw CommandError(.notFound, "this token has expired (a handed-off session waits --resume-ttl seconds): its pending changes are gone")
    }
}
