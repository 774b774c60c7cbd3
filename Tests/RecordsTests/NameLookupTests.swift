import Testing
@testable import Records

/// Names the client types reach an attribute or relationship by its exact spelling, else
/// case-insensitively when that names one only.
@Suite struct NameLookupTests {
    @Test func caseFoldingComparesAsLowercasing() {
        for (a, b) in [("first_name", "FIRST_NAME"), ("Dept", "dEPT"), ("x", "x"), ("Straße", "STRASSE"), ("é", "É"), ("a[", "A{"), ("", "")] {
            let attribute = Attribute(name: a, sqlType: "text", kind: .string, isNotNull: false, defaultValue: nil, isUnique: false, isPrimaryKey: false, isGenerated: false, comment: nil)
            let entity = Entity(name: "t", key: [], attributes: [attribute], relationships: [])
            #expect((entity.attribute(named: b) != nil) == (a.lowercased() == b.lowercased()), "\(a) \(b)")
        }
    }

    @Test func twoNamesThatFoldAlikeMustBeWrittenExactly() {
        let attributes = ["Name", "name", "Label"].map { Attribute(name: $0, sqlType: "text", kind: .string, isNotNull: false, defaultValue: nil, isUnique: false, isPrimaryKey: false, isGenerated: false, comment: nil) }
        var entity = Entity(name: "t", key: [], attributes: attributes, relationships: [])
        #expect(entity.attribute(named: "Name")?.name == "Name")
        #expect(entity.attribute(named: "name")?.name == "name")
        #expect(entity.attribute(named: "NAME") == nil)
        #expect(entity.attribute(named: "LABEL")?.name == "Label")
        // The index follows the lists when the model is built up.
        entity.attributes.append(Attribute(name: "Extra", sqlType: "text", kind: .string, isNotNull: false, defaultValue: nil, isUnique: false, isPrimaryKey: false, isGenerated: false, comment: nil))
        #expect(entity.attribute(named: "extra")?.name == "Extra")
    }

    @Test func aNameWrittenExactlyIsNeverTakenForAnotherInAnotherCase() {
        // An attribute `Dept` and a relationship `dept` (found by an attack: the relationship
        // could be set by no spelling, the attribute's case-folded match came first).
        let attribute = Attribute(name: "Dept", sqlType: "text", kind: .string, isNotNull: false, defaultValue: nil, isUnique: false, isPrimaryKey: false, isGenerated: false, comment: nil)
        let (relationship, _) = SampleModel.toOne("dept", of: "t", to: "department", inverse: "ts", column: "dept_id")
        let entity = Entity(name: "t", key: [], attributes: [attribute], relationships: [relationship])
        #expect(entity.fieldIndex(named: "dept") == (nil, 0))
        #expect(entity.fieldIndex(named: "Dept") == (0, nil))
        #expect(entity.fieldIndex(named: "DEPT") == (0, nil))  // folded: attributes first
        #expect(entity.fieldIndex(named: "nothing") == (nil, nil))
    }

    @Test func keywordsAreASCIIInAnyCase() throws {
        #expect("iNsErT".asciiUppercased == "INSERT")
        // `ſ` and `ı` upper-case to S and I, but spell no keyword.
        #expect("ſave".asciiUppercased != "SAVE")
        #expect(throws: CommandError.self) { try CommandParser.parse("ſave") }
        #expect(throws: CommandError.self) { try CommandParser.parse("FIND employee WHERE age ın {1, 2}") }
        #expect(throws: CommandError.self) { try CommandParser.parse(#"INSERT employee aſ #e first_name="A""#) }
        #expect(throws: CommandError.self) { try CommandParser.parse(#"INSERT employee first_name="\u+041""#) }
        #expect(try CommandParser.parse("save force") == .save(.force, key: nil))
    }

    @Test func relationshipsAndAttributesAreFoundInAnyCase() throws {
        let employee = try #require(SampleModel.model.entity(named: "employee"))
        #expect(employee.attribute(named: "FIRST_NAME")?.name == "first_name")
        #expect(employee.attribute(named: "department") == nil)
        #expect(employee.relationship(named: "DEPARTMENT")?.name == "department")
    }
}
