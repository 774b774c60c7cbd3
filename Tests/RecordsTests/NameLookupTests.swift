import Testing
@testable import Records

/// Names the client types reach an attribute or relationship by its exact spelling, else
/// case-insensitively when that names one only.
@Suite struct NameLookupTests {
    @Test func caseFoldingComparesAsLowercasing() {
        for (a, b) in [("first_name", "FIRST_NAME"), ("Dept", "dEPT"), ("x", "x"), ("Straße", "STRASSE"), ("é", "É"), ("a[", "A{"), ("", "")] {
            #expect(Entity.foldedEqual(a, b) == (a.lowercased() == b.lowercased()), "\(a) \(b)")
        }
    }

    @Test func relationshipsAndAttributesAreFoundInAnyCase() throws {
        let employee = try #require(SampleModel.model.entity(named: "employee"))
        #expect(employee.attribute(named: "FIRST_NAME")?.name == "first_name")
        #expect(employee.attribute(named: "department") == nil)
        #expect(employee.relationship(named: "DEPARTMENT")?.name == "department")
    }
}
