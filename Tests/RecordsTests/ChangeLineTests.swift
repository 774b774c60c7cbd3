import Testing
@testable import Records

/// The pushed lines of WATCH.
@Suite struct ChangeLineTests {
    @Test func keysThatAreNotOneWordAreQuoted() {
        #expect(Session.lines("employee", "updated", ["42", "7"]) == ["employee 42 updated", "employee 7 updated"])
        #expect(Session.lines("tag", "deleted", ["two words", "", "a\"b"]) == ["tag \"two words\" deleted", "tag \"\" deleted", "tag \"a\\\"b\" deleted"])
    }
}
