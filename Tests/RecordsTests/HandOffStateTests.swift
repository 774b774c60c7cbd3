import Foundation
import Testing
@testable import Records

/// A session's state survives its coding whole (what a stopping server writes and RESUME
/// reads), and tokens are what they claim; without a database.
@Suite struct HandOffStateTests {
    private func session() -> Session {
        Session(id: 1, context: ServerContext(model: SampleModel.model, databaseDescription: "test"))
    }

    private func reply(_ step: Session.Step) -> Reply? {
        if case .reply(let reply) = step { return reply }
        return nil
    }

    @Test func aUnitOfEveryKindOfChangeSurvivesItsCoding() throws {
        let original = session()
        for line in [
            #"INSERT department AS #d name="Ops \"quoted\" ünï" number=1"#,
            #"INSERT employee first_name="A" age=nil gender=1 department=#d"#,
            "FORMAT JSON",
            "NEST",
            #"INSERT department AS #n name="Nested" number=2"#,
            "NEST",
        ] {
            let answer = try #require(reply(original.handle(line)), "\(line)")
            guard case .ok = answer.status else { Issue.record("\(line) -> \(answer.statusLine)"); return }
        }
        // Changes by predicate count their matches in PostgreSQL: added here as the session would.
        for line in [#"UPDATE employee WHERE (age BETWEEN {30, 40} OR first_name BEGINSWITH[cd] "lé") AND department.name IN {"x", "y"} SET age=31 department=#d"#,
                     #"DELETE employee WHERE SUBQUERY(department.employees, $e, $e.age > 60).@count > 2 AND ANY department.employees.age == nil"#] {
            switch try CommandParser.parse(line) {
            case .updateWhere(let entity, let predicate, let values, let text):
                let fields = values.map { FieldAssignment(column: $0.name == "department" ? "department_id" : $0.name,
                                                          value: $0.value == .ref("d") ? .ref("d") : .text("31")) }
                original.unit.current.addBulk(BulkChange(entity: entity, predicate: predicate, kind: .update(fields), text: text))
            case .deleteWhere(let entity, let predicate, let text):
                original.unit.current.addBulk(BulkChange(entity: entity, predicate: predicate, kind: .delete, text: text))
            default: Issue.record("\(line)")
            }
        }
        original.unit.assign(["d": AssignedKey(entity: "department", values: ["id": "41"])])
        original.unit.recordReads([(RecordKey(entity: "employee", id: "7"), "1234")])
        let state = try #require(original.handOffState())
        let text = try HandOff.encode(state)
        let decoded = try HandOff.decode(text)
        let resumed = session()
        resumed.restore(decoded, watches: decoded.watches, seeds: [:])
        #expect(resumed.unit.layers == original.unit.layers)
        #expect(resumed.unit.assigned == original.unit.assigned)
        #expect(resumed.unit.reads.version(of: RecordKey(entity: "employee", id: "7")) == "1234")
        #expect(resumed.unit.current.fingerprint == original.unit.current.fingerprint)
        #expect(resumed.jsonReplies)
        #expect(decoded.pendingCount == original.unit.current.count)
        #expect(resumed.unit.current.bulk.count == 2)
        #expect(reply(resumed.handle("CHANGES")) == reply(original.handle("CHANGES")))
        // Its ref counter goes on where it was: the next insert's name is not taken twice.
        #expect(reply(resumed.handle(#"INSERT department name="More" number=3"#))?.statusLine == reply(original.handle(#"INSERT department name="More" number=3"#))?.statusLine)
        #expect(decoded.format == SessionState.currentFormat)
    }

    @Test func aSessionWithNothingToKeepHandsNothingOff() {
        let empty = session()
        #expect(empty.handOffState() == nil)
        _ = empty.handle("FORMAT JSON")
        #expect(empty.handOffState() == nil)
        _ = empty.handle("NEST")
        #expect(empty.handOffState()?.unit.depth == 1)  // an open scratchpad is kept, even empty
    }

    @Test func tokensAre128RandomBitsAndNothingElseLooksLikeOne() {
        let tokens = (0..<2000).map { _ in HandOff.newToken() }
        #expect(Set(tokens).count == tokens.count)
        #expect(tokens.allSatisfy(HandOff.isToken))
        #expect(tokens.allSatisfy { $0.utf8.count == 34 })
        // Every hex digit shows up in every position over 2,000 tokens: no fixed bits.
        for position in 2..<34 {
            let digits = Set(tokens.map { $0.utf8[$0.utf8.index($0.utf8.startIndex, offsetBy: position)] })
            #expect(digits.count == 16, "position \(position)")
        }
        for text in ["", "rt", "RT" + String(repeating: "a", count: 32), "rt" + String(repeating: "g", count: 32),
                     "rt" + String(repeating: "A", count: 32), "rt" + String(repeating: "a", count: 31), "rt" + String(repeating: "a", count: 33),
                     "xx" + String(repeating: "a", count: 32), "rt" + String(repeating: "a", count: 31) + "'"] {
            #expect(!HandOff.isToken(text), "\(text)")
        }
    }
}
