/// A read version given by the snapshot a read saw rather than by each row's `xmin`.
///
/// Selecting `xmin` is a fifth of PostgreSQL's work on a large FIND (one more column to
/// project and print a row). A FIND that streams, run while no transaction is writing, reads
/// its snapshot first and keeps it as the version of every record it returns. At UPDATE or
/// DELETE, the record's current `xmin` decides: a version its snapshot saw is the one the
/// FIND returned; any other is a change since.
///
/// Exact only when the snapshot has no transaction in progress: `pg_current_snapshot()` lists
/// top-level transactions only, and a row written by a subtransaction of one of them would
/// look committed. Reads taken with transactions in progress select `xmin` as before.
/// See https://www.postgresql.org/docs/15/functions-info.html#FUNCTIONS-PG-SNAPSHOT-PARTS
struct SnapshotVersion: Equatable {
    /// Transaction ids from this one on had not committed when the snapshot was taken.
    let xmax: UInt64

    /// Marks a version string as a snapshot's, which no `xmin` (digits) can equal.
    static let prefix = "@"

    /// A snapshot with nothing in progress (`xmin:xmax:` with xmin = xmax), else nil: only
    /// such a snapshot can stand for its rows' versions.
    init?(snapshot text: Substring) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 3, let xmin = UInt64(parts[0]), let xmax = UInt64(parts[1]), xmin == xmax, parts[2].isEmpty else { return nil }
        self.xmax = xmax
    }

    /// The version string of `pg_current_snapshot()`'s text, or nil when it cannot stand for
    /// the versions (something was in progress).
    static func stamp(_ snapshot: String) -> String? {
        SnapshotVersion(snapshot: Substring(snapshot)) == nil ? nil : prefix + snapshot
    }

    init?(version: String) {
        guard version.hasPrefix(Self.prefix) else { return nil }
        self.init(snapshot: version.dropFirst(Self.prefix.count))
    }

    /// Whether the row version written by `xid` (32 bits, as `xmin` prints it) is one this
    /// snapshot saw. `horizon`: the xmax of a snapshot taken when the row was read, which
    /// dates the 32-bit id: the row's transaction is the latest id below the horizon with
    /// those low bits (ids are reused every 2³² transactions; a row not rewritten for that
    /// long is frozen and could be misdated, seen as changed: a false conflict, never a lost one).
    func saw(xid: UInt32, horizon: UInt64) -> Bool {
        // Ids below 3 are PostgreSQL's own (bootstrap, frozen): older than anything.
        guard xid >= 3 else { return true }
        var back = UInt64(UInt32(truncatingIfNeeded: horizon) &- xid)
        if back == 0 { back = 1 << 32 }
        guard horizon >= back else { return true }  // before the cluster's first epoch ended
        return horizon - back < xmax
    }
}

extension ReadVersions {
    /// The version a unit holds for a record read as `read`, now stored as `current` (its
    /// `xmin`), `horizon` being the xmax of the snapshot that read it: `read` itself, or for
    /// a snapshot's version, `current` when the snapshot saw it, else the snapshot's version
    /// (which no `xmin` equals: a change since the read).
    static func resolve(_ read: String?, current: String, horizon: String?) -> String? {
        guard let read, let snapshot = SnapshotVersion(version: read) else { return read }
        guard let xid = UInt32(current), let horizon = horizon.flatMap({ UInt64($0) }) else { return read }
        return snapshot.saw(xid: xid, horizon: horizon) ? current : read
    }

    /// `resolve` for the version this unit read of `key`.
    func version(of key: RecordKey, current: String, horizon: String?) -> String? {
        Self.resolve(version(of: key), current: current, horizon: horizon)
    }
}
