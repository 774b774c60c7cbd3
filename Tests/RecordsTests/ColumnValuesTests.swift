import Foundation
import Testing
@testable import Records

/// A pending insert's key values by column (`ColumnValues`): a dictionary's behaviour for the
/// few columns a key has, and its form when a unit is handed to another build.
@Suite struct ColumnValuesTests {
    @Test func behavesAsADictionaryOfItsColumns() {
        var values = ColumnValues()
        #expect(values.isEmpty && values["id"] == nil)
        values["project"] = "3"
        values["employee"] = "7"
        values["project"] = "4"
        #expect(values.count == 2 && values["project"] == "4" && values["employee"] == "7")
        values["project"] = nil
        #expect(values.count == 1 && values["project"] == nil)
        // Equal whatever the order the columns were set in.
        let literal: ColumnValues = ["b": "2", "a": "1"]
        #expect(literal == ["a": "1", "b": "2"])
        #expect(literal != ["a": "1"] && literal != ["a": "1", "b": "3"])
        // A column both hold: `combine(mine, theirs)`; the others added.
        let merged = literal.merging(["b": "9", "c": "3"]) { mine, _ in mine }
        #expect(merged == ["a": "1", "b": "2", "c": "3"])
        #expect(ColumnValues().merging(literal) { $1 } == literal)
        #expect(Array(literal.map(\.column)) == ["b", "a"])
    }

    @Test func encodesAsTheDictionaryItReplaced() throws {
        // A unit handed from the build before (`[String: String]`) reads the same, and back.
        let key = AssignedKey(entity: "membership", values: ["org": "a1", "tag": "t\\0"])
        let encoded = try JSONEncoder().encode(key)
        struct Before: Codable { var entity: String; var values: [String: String] }
        let before = try JSONDecoder().decode(Before.self, from: encoded)
        #expect(before.entity == "membership" && before.values == ["org": "a1", "tag": "t\\0"])
        let read = try JSONDecoder().decode(AssignedKey.self, from: JSONEncoder().encode(before))
        #expect(read == key)
    }

    @Test func rowsTypedAlikeAreRecognisedInOrder() {
        let row = PendingInsert(ref: "e1", entity: "employee", fields: [("first_name", .text("Ada")), ("age", .text("36"))])
        #expect(row.sets(exactly: ["first_name", "age"]))
        #expect(!row.sets(exactly: ["age", "first_name"]))
        #expect(!row.sets(exactly: ["first_name"]))
        #expect(!row.sets(exactly: ["first_name", "age", "gender"]))
        #expect(PendingInsert(ref: "e2", entity: "employee", fields: []).sets(exactly: []))
    }
}
