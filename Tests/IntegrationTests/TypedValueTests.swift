import Foundation
import Postgres
import RecordsClient
import Testing

/// A conflict's values and a pending change's, under FORMAT JSON, are typed as a read types
/// the field: each equals the field as FIND writes it — before the change (`read`, `old`),
/// after the other session's SAVE (`now`), and after this one's (`yours`, `new`). Run over
/// the toolshed's tools (a numeric domain, real, an enum, arrays of text, int, date and uuid,
/// bytea, a char(3) foreign key) and a table of booleans, timestamps, jsonb and numeric.
@Suite struct TypedValueTests {
    static let shifts = """
        CREATE TABLE shifts (id int PRIMARY KEY, on_duty boolean, starts timestamptz, notes jsonb, grade numeric(4, 1), badge bytea);
        INSERT INTO shifts VALUES (1, false, '2026-01-02 08:00:00+00', '{"a": 1}', 2.5, '\\x00ff');
        INSERT INTO branches VALUES ('EST', 'East', 'Tromsø', NULL);
        """

    /// Each entity's record 1, changed by this session (`mine`) and by another (`theirs`).
    static let changes: [(entity: String, mine: String, theirs: String)] = [
        ("tools", #"name="Drill 2" state="repair" deposit=30.5 weight_kg=2.75 tags=["a", "b c"] sizes=[1, 2] service=["2026-09-01"] serials=["6f1c0d52-0000-4000-8000-0000000000aa"] photo="AAEC" branch="SOU""#,
                  #"name="Drill 3" state="lent" deposit=31 weight_kg=3.5 tags=["z"] sizes=[] service=["2026-10-01", "2026-10-02"] serials=[] photo="/w==" branch="EST""#),
        ("shifts", #"on_duty=true starts="2026-02-03T09:30:00Z" notes="{\"b\": [1, 2]}" grade=3.5 badge="AQID""#,
                   #"on_duty=NULL starts="2026-03-04T10:45:30.25Z" notes="[true, null]" grade=-4 badge="""#),
    ]

    @Test func conflictAndChangeValuesAreTypedAsReadsAre() throws {
        let schema = try Schema(try ExistingDatabaseTests.toolshed + "\n" + ExistingDatabaseTests.rows + "\n" + Self.shifts)
        let server = try TestServer(schema: schema)
        let mine = try server.client(), theirs = try server.client()
        try mine.ok("FORMAT JSON")
        try theirs.ok("FORMAT JSON")
        func object(_ line: String) throws -> [String: Any] {
            guard let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any] else { throw TestFailure("not an object: \(line)") }
            return object
        }
        func stored(_ entity: String) throws -> [String: Any] {
            let reply = try theirs.send("FIND \(entity) WHERE id == 1")
            guard reply.ok, reply.lines.count == 1 else { throw TestFailure("\(reply)") }
            return try object(reply.lines[0])
        }
        // The same JSON value; a timestamp the same instant however its offset is written.
        func same(_ a: Any?, _ b: Any?) -> Bool {
            func instant(_ text: String) -> Date? {
                let formatter = ISO8601DateFormatter()
                if let date = formatter.date(from: text) { return date }
                formatter.formatOptions = [.withInternetDateTime, .withFractionalSeconds]
                return formatter.date(from: text)
            }
            if let a = a as? String, let b = b as? String, let x = instant(a), let y = instant(b) { return x == y }
            func canonical(_ value: Any?) -> Data? {
                try? JSONSerialization.data(withJSONObject: [value ?? NSNull()], options: [.sortedKeys, .fragmentsAllowed])
            }
            return canonical(a) == canonical(b)
        }
        for change in Self.changes {
            let before = try stored(change.entity)
            try mine.ok("UPDATE \(change.entity) 1 \(change.mine)")
            let pending = try mine.send("CHANGES")
            let update = try object(pending.lines.first ?? "")
            let fields = try #require(update["changes"] as? [String: [String: Any]], "\(pending)")
            #expect(fields.count == 10 || change.entity == "shifts" && fields.count == 5, "\(fields.keys)")
            try theirs.ok("UPDATE \(change.entity) 1 \(change.theirs)")
            try theirs.ok("SAVE")
            let now = try stored(change.entity)
            let refused = try mine.send("SAVE")
            #expect(refused.status.hasPrefix("-ERR CONFLICT"), "\(refused)")
            let conflicts = try refused.lines.map(object)
            #expect(Set(conflicts.compactMap { $0["field"] as? String }) == Set(fields.keys), "\(refused)")
            try mine.ok("SAVE FORCE")
            let after = try stored(change.entity)
            for (field, values) in fields {
                #expect(same(values["old"], before[field]), "\(change.entity).\(field): CHANGES old \(values["old"] ?? "nil"), FIND \(before[field] ?? "nil")")
                #expect(same(values["new"], after[field]), "\(change.entity).\(field): CHANGES new \(values["new"] ?? "nil"), FIND \(after[field] ?? "nil")")
            }
            for conflict in conflicts {
                let field = conflict["field"] as? String ?? "?"
                #expect(same(conflict["read"], before[field]), "\(change.entity).\(field): read \(conflict["read"] ?? "nil"), FIND \(before[field] ?? "nil")")
                #expect(same(conflict["now"], now[field]), "\(change.entity).\(field): now \(conflict["now"] ?? "nil"), FIND \(now[field] ?? "nil")")
                #expect(same(conflict["yours"], after[field]), "\(change.entity).\(field): yours \(conflict["yours"] ?? "nil"), FIND \(after[field] ?? "nil")")
            }
        }
    }

    /// The library's `Conflict` carries them typed, and each decodes as a model's field would.
    @Test func theLibrarysConflictValuesDecodeAsModelFields() async throws {
        let schema = try Schema(try ExistingDatabaseTests.toolshed + "\n" + ExistingDatabaseTests.rows + "\n" + Self.shifts)
        let server = try TestServer(schema: schema)
        let mine = try await RecordsClient.connect("records://127.0.0.1:\(server.port)")
        let theirs = try await RecordsClient.connect("records://127.0.0.1:\(server.port)")
        try await mine.request(#"UPDATE shifts 1 on_duty=true grade=3.5 starts="2026-02-03T09:30:00Z" badge="AQID" notes="{\"b\": [1, 2]}""#)
        try await mine.request(#"UPDATE tools 1 sizes=[4] weight_kg=1"#)
        try await theirs.request(#"UPDATE shifts 1 on_duty=NULL grade=-4 starts="2026-03-04T10:45:30Z" badge="/w==" notes="[true, null]""#)
        try await theirs.request(#"UPDATE tools 1 sizes=[5, 6] weight_kg=2.5"#)
        try await theirs.save()
        do {
            try await mine.save()
            Issue.record("a conflicting SAVE succeeded")
        } catch RecordsError.conflict(_, let conflicts) {
            let byField = Dictionary(uniqueKeysWithValues: conflicts.compactMap { c in c.field.map { ($0, c) } })
            #expect(byField["on_duty"]?.yours == .bool(true))
            #expect(byField["on_duty"]?.now == nil)  // NULL: an optional's nil, as in a model
            #expect(byField["on_duty"]?.read == .bool(false))
            #expect(byField["grade"]?.now == .integer(-4) || byField["grade"]?.now == .decimal(-4), "\(String(describing: byField["grade"]))")
            #expect(try byField["grade"]?.yours?.decode(Decimal.self) == Decimal(string: "3.5"))
            #expect(try byField["starts"]?.now?.decode(Date.self) == Date(timeIntervalSince1970: 1_772_621_130))
            #expect(try byField["badge"]?.yours?.decode(Data.self) == Data([1, 2, 3]))
            #expect(byField["notes"]?.now == .array([.bool(true), .null]))
            #expect(byField["notes"]?.yours == .object(["b": .array([.integer(1), .integer(2)])]))
            #expect(byField["sizes"]?.now == .array([.integer(5), .integer(6)]))
            #expect(try byField["sizes"]?.read?.decode([Int].self) == [8, 10])
            #expect(byField["weight_kg"]?.now == .decimal(Decimal(string: "2.5")!))
        }
    }
}
