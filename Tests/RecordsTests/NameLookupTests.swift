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

    @Test func relationshipsAndAttributesAreFoundInAnyCase() throws {
        let employee = try #require(SampleModel.model.entity(named: "employee"))
        #expect(employee.attribute(named: "FIRST_NAME")?.name == "first_name")
        #expect(employee.attribute(named: "department") == nil)
        #expect(employee.relationship(named: "DEPARTMENT")?.name == "department")
    }
}
