import Foundation
import Postgres
import Testing

/// A FIND that streams keeps its snapshot as the version of every record it returned, when no
/// transaction was in progress (SnapshotVersion), else each row's xmin. Either way an UPDATE or
/// DELETE of a record changed since the FIND says so and SAVE reports the conflict, and one
/// unchanged since goes through: checked on keys that are text, composite and uuid.
@Suite struct ReadVersionTests {
    static let schema = """
        CREATE TABLE part (code text PRIMARY KEY, qty int NOT NULL);
        CREATE TABLE bin (aisle int, slot int, label text, PRIMARY KEY (aisle, slot));
        CREATE TABLE token (id uuid PRIMARY KEY DEFAULT gen_random_uuid(), n int UNIQUE NOT NULL, v int);
        INSERT INTO part SELECT 'p' || i, i FROM generate_series(1, 1500) i;
        INSERT INTO bin SELECT 1 + i / 100, i % 100, 'b' || i FROM generate_series(0, 1499) i;
        INSERT INTO token (n, v) SELECT i, i FROM generate_series(1, 1500) i;
        """

    private func scalar(_ db: Connection, _ sql: String) throws -> String? { try db.query(sql).string(0, 0) }

    /// The three tables' record names for the FIND's row `i`, and the same change by SQL.
    private func records(_ db: Connection, _ i: Int) throws -> [(find: String, update: String, delete: String, sql: String)] {
        let uuid = try scalar(db, "SELECT id FROM token WHERE n = \(i)")!
        return [("FIND part", #"UPDATE part "p\#(i)" qty=0"#, #"DELETE part "p\#(i)""#, "UPDATE part SET qty = -1 WHERE code = 'p\(i)'"),
                ("FIND bin", "UPDATE bin aisle=1 slot=\(i) SET label=\"mine\"", "DELETE bin aisle=1 slot=\(i)",
                 "UPDATE bin SET label = 'theirs' WHERE aisle = 1 AND slot = \(i)"),
                ("FIND token", #"UPDATE token "\#(uuid)" v=0"#, #"DELETE token "\#(uuid)""#, "UPDATE token SET v = -1 WHERE n = \(i)")]
    }

    @Test func aStreamedFindCatchesChangesMadeSinceAndOnlyThose() throws {
        let server = try TestServer(schema: try Schema(Self.schema))
        let db = try server.database()
        let client = try server.client()
        for (index, record) in try records(db, 7).enumerated() {
            let unchanged = try records(db, 8)[index]
            #expect(try client.send(record.find).status == "+OK 1500 records")
            try db.execute(record.sql)
            let update = try client.send(record.update)
            #expect(update.status.hasSuffix("(1 pending); note: changed by another session since this unit read it, so SAVE will report a CONFLICT unless FORCE"), "\(update.status)")
            let other = try client.send(unchanged.update)
            #expect(other.status.hasSuffix("(2 pending)"), "\(other.status)")
            #expect(try client.send("SAVE").status.hasPrefix("-ERR CONFLICT 1 record(s) changed by another session since this unit read them"))
            #expect(try client.send("ROLLBACK").ok)
            // Read again: the change is now what was read, and both updates save.
            #expect(try client.send(record.find).status == "+OK 1500 records")
            #expect(try client.send(record.update).status.hasSuffix("(1 pending)"))
            #expect(try client.send(unchanged.update).status.hasSuffix("(2 pending)"))
            #expect(try client.send("SAVE").status == "+OK saved: 0 inserted, 2 updated, 0 deleted, 0 cascaded, 0 nullified")
            // A delete of a record changed since the FIND is a conflict too.
            #expect(try client.send(record.find).status == "+OK 1500 records")
            try db.execute(record.sql.replacingOccurrences(of: "-1", with: "-2").replacingOccurrences(of: "'theirs'", with: "'again'"))
            let delete = try client.send(record.delete)
            #expect(delete.status.contains("; note: changed by another session since this unit read it"), "\(delete.status)")
            #expect(try client.send("SAVE").status.hasPrefix("-ERR CONFLICT 1 record(s) changed by another session since this unit read them"))
            #expect(try client.send("ROLLBACK").ok)
        }
    }

    /// A writer's subtransaction in progress when the FIND began, committed after it: the
    /// snapshot's list of transactions in progress names no subtransaction, so the FIND must
    /// not stand for versions then (it reads each row's xmin), and the change is caught.
    @Test func aChangeCommittedAfterTheFindBySubtransactionIsCaught() throws {
        let server = try TestServer(schema: try Schema(Self.schema))
        let db = try server.database()
        let writer = try server.database()
        let client = try server.client()
        for (index, record) in try records(db, 9).enumerated() {
            let unchanged = try records(db, 10)[index]
            try writer.execute("BEGIN; SELECT pg_current_xact_id(); SAVEPOINT s; " + record.sql)
            // A later transaction that ends first: the snapshot's xmax passes the subtransaction.
            _ = try db.query("SELECT pg_current_xact_id()")
            #expect(try client.send(record.find).status == "+OK 1500 records")
            try writer.execute("RELEASE s; COMMIT")
            let update = try client.send(record.update)
            #expect(update.status.hasSuffix("note: changed by another session since this unit read it, so SAVE will report a CONFLICT unless FORCE"), "\(update.status)")
            #expect(try client.send(unchanged.update).status.hasSuffix("(2 pending)"))
            #expect(try client.send("SAVE").status.hasPrefix("-ERR CONFLICT 1 record(s) changed by another session since this unit read them"))
            #expect(try client.send("SAVE FORCE").status == "+OK saved: 0 inserted, 2 updated, 0 deleted, 0 cascaded, 0 nullified")
        }
    }

    /// With pending changes the FIND runs in the unit's view (its rows carry this unit's
    /// writes): versions are each row's xmin, and a change since is caught the same way.
    @Test func aFindInTheUnitsViewCatchesChangesToo() throws {
        let server = try TestServer(schema: try Schema(Self.schema))
        let db = try server.database()
        let client = try server.client()
        try client.ok(#"INSERT part code="new" qty=1"#)
        #expect(try client.send("FIND part").status == "+OK 1501 records")
        try db.execute("UPDATE part SET qty = -1 WHERE code = 'p11'")
        #expect(try client.send(#"UPDATE part "p11" qty=0"#).status.hasSuffix("note: changed by another session since this unit read it, so SAVE will report a CONFLICT unless FORCE"))
        #expect(try client.send(#"UPDATE part "p12" qty=0"#).status.hasSuffix("(3 pending)"))
        #expect(try client.send("SAVE").status.hasPrefix("-ERR CONFLICT 1 record(s) changed by another session since this unit read them"))
    }
}
