import Foundation
import Testing
@testable import Records

/// The `#ref` names of pending inserts: those the server generates (`e1`, `d2`, ...) are kept
/// apart from those the client gives, and every name finds its own insert whatever was given,
/// dropped or decoded in between.
@Suite struct InsertNamesTests {
    private func field(_ value: String) -> [(column: String, value: FieldValue)] { [("name", .text(value))] }

    @Test func generatedAndGivenNamesNeverMeetAndAlwaysFindTheirInsert() throws {
        var unit = ChangeSet()
        #expect(unit.addGenerated(entity: "employee", fields: field("a")) == "e1")
        #expect(unit.addGenerated(entity: "department", fields: field("b")) == "d2")
        unit.add(PendingInsert(ref: "e4", entity: "employee", fields: field("given")))
        #expect(unit.addGenerated(entity: "employee", fields: field("c")) == "e3")
        #expect(unit.addGenerated(entity: "employee", fields: field("d")) == "e5")  // e4 is the client's
        #expect(unit.insert("e4")?.fields.first?.value == .text("given"))
        #expect(unit.insert("e5")?.fields.first?.value == .text("d"))
        // Names that read as a generated number but are not the very name find nothing.
        for name in ["x2", "e2", "e0003", "e+3", "3", "", "e", "d02"] { #expect(unit.insert(name) == nil, "\(name)") }
        #expect(unit.insert("d2")?.entity == "department")
        unit.removeInsert("d2")
        #expect(unit.insert("d2") == nil && unit.insert("e3")?.fields.first?.value == .text("c"))
        // The last insert dropped, its serial is given again: its name stays gone.
        unit.removeInsert("e5")
        #expect(unit.addGenerated(entity: "employee", fields: field("f")) == "e6")
        #expect(unit.insert("e5") == nil && unit.insert("e6")?.fields.first?.value == .text("f"))
        unit.removeInsert("e4")
        #expect(unit.insert("e4") == nil && unit.inserts.map(\.ref) == ["e1", "e3", "e6"])
        // A unit handed to another server reads the same, and goes on naming without a clash.
        let decoded = try JSONDecoder().decode(ChangeSet.self, from: JSONEncoder().encode(unit))
        #expect(decoded == unit)
        var next = decoded
        #expect(next.addGenerated(entity: "employee", fields: field("g")) == "e7")
        #expect(next.inserts.map(\.ref).allSatisfy { next.insert($0)?.ref == $0 })
    }

    @Test func namesOfEntitiesThatDoNotStartWithAnAsciiLetter() {
        var unit = ChangeSet()
        let names = ["1abc", "e\u{301}tude", "Ölçü", "日本"].map { unit.addGenerated(entity: $0, fields: field($0)) }
        #expect(names == ["11", "e\u{301}2", "Ö3", "日4"])
        for (name, entity) in zip(names, ["1abc", "e\u{301}tude", "Ölçü", "日本"]) { #expect(unit.insert(name)?.entity == entity, "\(name)") }
    }
}
