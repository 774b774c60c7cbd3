import Testing
@testable import Records

/// The pushed lines of WATCH: each key as commands take it.
@Suite struct ChangeLineTests {
    @Test func keysReadAsCommandsTakeThem() {
        let employee = SampleModel.model.entity(named: "employee")!
        #expect(WatchEvents.lines(employee, .updated, [RecordKey(entity: "employee", id: "42"), RecordKey(entity: "employee", id: "7")])
                == ["employee 42 updated", "employee 7 updated"])
        let tag = SampleModel.tag
        #expect(WatchEvents.lines(tag, .deleted, ["two words", "", "a\"b"].map { RecordKey(entity: "tag", id: $0) })
                == ["tag \"two words\" deleted", "tag \"\" deleted", "tag \"a\\\"b\" deleted"])
        let member = SampleModel.model.entity(named: "project_member")!
        #expect(WatchEvents.lines(member, .inserted, [RecordKey(entity: "project_member", values: ["3", "7"])])
                == ["project_member project=3 employee=7 inserted"])
    }
}
