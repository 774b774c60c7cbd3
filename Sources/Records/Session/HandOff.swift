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
    /// The commit mark the session's next SAVE writes: found in `records.save_marks`, that SAVE
    /// committed (its reply lost with a crashed server), and the unit is saved.
    public var nextSaveMark: Int64?

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
    public static func newToken() -> String { "rt" + Secret.hex128() }

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
        /// The mark its next SAVE writes (`SessionState.nextSaveMark`).
        public var mark: Int64?
        /// A token the session's state was written under before (another owner's): removed in
        /// the same transaction.
        public var retired: String?
        public init(token: String, owner: String?, state: String, pending: Int, mark: Int64?, retired: String? = nil) {
            self.token = token
            self.owner = owner
            self.state = state
            self.pending = pending
            self.mark = mark
            self.retired = retired
        }
    }

    /// Writes the entries' states (a few hundred a statement); `open`: their sessions go on
    /// here (--durable-units), else they closed. A token already redeemed is never written
    /// again: a late write cannot bring back a session that moved on.
    static let storeSQL = """
        INSERT INTO records.handoff AS h (token_hash, owner, state, pending, mark, expires_at, server, open)
        SELECT sha256(convert_to(t, 'UTF8')), o, s::jsonb, p, m, now() + make_interval(secs => $6::int), $7, $8
        FROM unnest($1::text[], $2::text[], $3::text[], $4::int[], $5::bigint[]) AS u(t, o, s, p, m)
        ON CONFLICT (token_hash) DO UPDATE
        SET state = EXCLUDED.state, pending = EXCLUDED.pending, mark = EXCLUDED.mark, written_at = now(),
            expires_at = EXCLUDED.expires_at, server = EXCLUDED.server, open = EXCLUDED.open
        WHERE h.spent_at IS NULL AND h.owner IS NOT DISTINCT FROM EXCLUDED.owner
        """

    /// Writes the entries; returns how many were not written: their tokens were redeemed
    /// meanwhile (the session moved on) or are another owner's. Said, never skipped in silence.
    @discardableResult
    public static func store(_ entries: [Entry], ttl: Int, server: String, open: Bool, _ connection: Connection) throws -> Int {
        guard !entries.isEmpty else { return 0 }
        return try connection.transaction { try write(entries, ttl: ttl, server: server, open: open, connection) }
    }

    /// `store`'s statements, in the caller's transaction (RESUME writes the state it resumed
    /// in the transaction that spends the old token).
    /// `synchronous`: wait for the disk even for an open session (RESUME: the transaction also
    /// spends the old token).
    @discardableResult
    static func write(_ entries: [Entry], ttl: Int, server: String, open: Bool, synchronous: Bool? = nil, _ connection: Connection) throws -> Int {
        // A large unit takes longer than a read's time limit to write. A session still open
        // (--durable-units) needs its state only if this server dies, and it keeps the
        // state itself if PostgreSQL does: its writes need not wait for the disk (a
        // commit's flush cost three times the SAVE it guards).
        try connection.query("SELECT set_config('statement_timeout', '0', true), set_config('synchronous_commit', $1, true)", [synchronous ?? !open ? "on" : "off"])
        let retired = entries.compactMap(\.retired)
        if !retired.isEmpty {
            try connection.query("""
                DELETE FROM records.handoff WHERE spent_at IS NULL
                  AND token_hash IN (SELECT sha256(convert_to(t, 'UTF8')) FROM unnest($1::text[]) AS t)
                """, [SQL.arrayLiteral(retired)])
        }
        var start = 0, skipped = 0
        while start < entries.count {
            let chunk = entries[start..<min(start + 500, entries.count)]
            let written = try connection.query(storeSQL, [SQL.arrayLiteral(chunk.map(\.token)), SQL.arrayLiteral(chunk.map(\.owner)),
                                                          SQL.arrayLiteral(chunk.map(\.state)), SQL.arrayLiteral(chunk.map { String($0.pending) }),
                                                          SQL.arrayLiteral(chunk.map { $0.mark.map(String.init) }),
                                                          String(ttl + (open ? openSlackSeconds : 0)), server, open ? "t" : "f"])
            skipped += chunk.count - written.affectedRows
            start += chunk.count
        }
        return skipped
    }

    /// A durable session ended on its server: closed by the client's QUIT (nothing to resume:
    /// the row goes), or otherwise (the client may come back: it stays, no longer open).
    public static func sessionEnded(_ token: String, quit: Bool, _ connection: Connection) throws {
        if quit {
            try connection.query("DELETE FROM records.handoff WHERE token_hash = sha256(convert_to($1, 'UTF8')) AND spent_at IS NULL", [token])
        } else {
            try connection.query("UPDATE records.handoff SET open = false WHERE token_hash = sha256(convert_to($1, 'UTF8')) AND spent_at IS NULL", [token])
        }
    }

    /// Held by each server's listening connection for its life: a session still open on a
    /// server whose lock is free belongs to a server that is gone (a crash).
    public static func holdLiveness(server: String, _ connection: Connection) throws {
        try connection.query("SELECT pg_advisory_lock(hashtextextended($1, 0))", ["recordsd " + server])
    }

    /// The unique index that makes a commit mark single-use (`records.save_marks (nonce)`).
    public static let fenceIndex = "save_marks_fence"

    /// Whether a SAVE failed because its mark was fenced: the session was resumed elsewhere.
    public static func isFenced(_ error: PostgresError) -> Bool {
        error.sqlState == .uniqueViolation && error.schema == "records" && error.constraint == fenceIndex
    }

    /// What became of a handed-off session's SAVE mark.
    public enum Fence: Equatable, Sendable {
        /// A SAVE with this mark committed: its unit is saved.
        case committed
        /// Written here first: no SAVE with this mark will ever commit.
        case fenced
    }

    /// Writes `mark` (in the caller's transaction, or on its own). A SAVE that already wrote it
    /// is waited for (a unique index waits for the inserting transaction); one that has not
    /// yet will fail on it. Either way at most one SAVE with the mark commits, and what is
    /// answered stays true. A fence's row has transaction id 0, which no SAVE's has: a fence
    /// written before (its answer lost) still answers `fenced`, never `committed`.
    public static func fence(_ mark: Int64, _ connection: Connection) throws -> Fence {
        // The second test reads the statement's snapshot: a fence committed before it is seen,
        // a SAVE committed while the insert waited is not (it is the conflict).
        let answer = try connection.query("""
            WITH written AS (INSERT INTO records.save_marks (xid, nonce) VALUES ('0', $1::bigint)
                             ON CONFLICT (nonce) DO NOTHING RETURNING 1)
            SELECT EXISTS (SELECT 1 FROM written) OR EXISTS (SELECT 1 FROM records.save_marks WHERE nonce = $1::bigint AND xid = '0')
            """, [String(mark)])
        return answer.string(0, 0) == "t" ? .fenced : .committed
    }

    /// A state open on a live server (--durable-units) expires this long past `--resume-ttl`:
    /// the server renews it when half of this is used (`keepOpen`, every 30 s), so after a
    /// crash it waits at least the ttl, however long the session was idle before.
    public static let openSlackSeconds = 120

    /// Keeps the states of sessions open on this server from expiring while it lives.
    public static func keepOpen(server: String, ttl: Int, _ connection: Connection) throws {
        try connection.query("""
            UPDATE records.handoff SET expires_at = now() + make_interval(secs => $2::int + $3::int)
            WHERE server = $1 AND open AND spent_at IS NULL AND expires_at < now() + make_interval(secs => $2::int + $3::int / 2)
            """, [server, String(ttl), String(openSlackSeconds)])
    }

    /// A live token of `owner` (nil: a session that did not sign in), locked: a concurrent
    /// RESUME of the same token waits here for the first, then finds it spent.
    static let findSQL = """
        SELECT state::text, round(extract(epoch FROM now() - written_at))::int, open, server
        FROM records.handoff
        WHERE token_hash = sha256(convert_to($1, 'UTF8')) AND spent_at IS NULL AND expires_at > now()
          AND owner IS NOT DISTINCT FROM $2
        FOR UPDATE
        """
    static let spendSQL = "UPDATE records.handoff SET spent_at = now(), state = 'null'::jsonb WHERE token_hash = sha256(convert_to($1, 'UTF8'))"
    /// How many more times (100 ms apart) RESUME tries the liveness lock of the server a state
    /// is open on: a server killed a moment ago is gone once PostgreSQL sees its connections close.
    static let livenessTries = 10
    /// Takes the liveness lock of `server` for the transaction, trying again for a moment for a
    /// server just killed; refused while the server lives. Tried, never waited for: a wait
    /// queued behind the live holder let sessions still open be taken.
    static func awaitGone(server: String, _ connection: Connection) throws {
        for attempt in 0...livenessTries {
            if attempt > 0 { usleep(100_000) }
            let taken = try connection.query("SELECT pg_try_advisory_xact_lock(hashtextextended($1, 0))", ["recordsd " + server])
            if taken.string(0, 0) == "t" { return }
        }
        throw CommandError(.unavailable, "this session is still open on its server: RESUME once that connection has closed")
    }

    /// Why a token was not spent.
    static let explainSQL = """
        SELECT owner IS NOT DISTINCT FROM $2, spent_at IS NOT NULL, expires_at > now()
        FROM records.handoff WHERE token_hash = sha256(convert_to($1, 'UTF8'))
        """

    /// The state `token` holds, spent; refused clearly when it is unknown or spent, expired,
    /// another user's (left for its owner), or its session is still open on a running server.
    static func redeem(_ token: String, owner: String?, _ connection: Connection) throws -> (state: String, secondsAgo: Int) {
        let found = try connection.query(findSQL, [token, owner])
        if found.rowCount == 1, let state = found.string(0, 0) {
            // Open: only if its server is gone.
            if found.string(0, 2) == "t" { try awaitGone(server: found.string(0, 3) ?? "", connection) }
            try connection.query(spendSQL, [token])
            return (state, Int(found.string(0, 1) ?? "0") ?? 0)
        }
        let why = try connection.query(explainSQL, [token, owner])
        guard why.rowCount == 1, why.string(0, 1) == "f" else {
            throw CommandError(.notFound, "no session to resume with this token: it is unknown, or was already resumed (a token works once)")
        }
        guard why.string(0, 0) == "t" else {
            throw CommandError(.forbidden, "this token belongs to another user: AUTH as the user whose session it was")
        }
        throw CommandError(.notFound, "this token has expired (a handed-off session waits --resume-ttl seconds): its pending changes are gone")
    }
}
