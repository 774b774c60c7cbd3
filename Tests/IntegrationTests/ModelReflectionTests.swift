import Foundation
import Postgres
@testable import Records
import Testing

@Suite struct ModelReflectionTests {
    private func sampleModel() throws -> Model {
        let url = try TestEnvironment.freshDatabase()
        let connection = try Connection(url)
        _ = try Migrator.migrate(try Migrator.load(directory: TestEnvironment.migrations), connection: connection)
        return try ModelReflector.reflect(connection)
    }

    @Test func entitiesAndAttributesAreWhatTheMigrationsSay() throws {
        let model = try sampleModel()
        #expect(model.entities.map(\.name) == ["assignment", "color", "contact", "department", "employee", "friend",
                                               "game", "journal_entry", "memo", "project", "setting"])
        let employee = try #require(model.entity(named: "EMPLOYEE"))
        #expect(employee.primaryKey.name == "id")
        #expect(employee.keySequence == "public.employee_id_seq")
        #expect(employee.attributes.map(\.name) == ["id", "first_name", "last_name", "gender", "age"])
        #expect(employee.attributes.filter(\.isRequired).map(\.name) == ["first_name", "last_name", "gender"])
        #expect(employee.attribute(named: "gender")?.kind == .integer(bits: 16))
        let memo = try #require(model.entity(named: "memo"))
        #expect(memo.attribute(named: "uid")?.isUnique == true)
        #expect(memo.attribute(named: "lastmodified")?.isRequired == false)
        #expect(memo.attribute(named: "lastmodified")?.kind == .timestamp)
        #expect(model.entity(named: "friend")?.attribute(named: "photo")?.kind == .binary)
        #expect(model.entity(named: "color")?.attribute(named: "alpha")?.kind == .double)
        #expect(model.entity(named: "game")?.attribute(named: "name")?.isUnique == true)
    }

    @Test func relationshipsCarryInversesAndDeleteRules() throws {
        let model = try sampleModel()
        let department = try #require(model.entity(named: "employee")?.relationship(named: "department"))
        #expect(department.target == "department")
        #expect(!department.isToMany)
        #expect(department.inverse == "employees")
        #expect(department.deleteRule == .cascade)
        let employees = try #require(model.entity(named: "department")?.relationship(named: "employees"))
        #expect(employees.isToMany)
        #expect(employees.inverse == "department")
        #expect(model.entity(named: "memo")?.relationship(named: "color")?.deleteRule == .nullify)
        #expect(model.entity(named: "color")?.relationship(named: "memos")?.isToMany == true)
        #expect(model.entity(named: "assignment")?.relationship(named: "project")?.deleteRule == .deny)
        #expect(model.entity(named: "assignment")?.relationship(named: "employee")?.deleteRule == .cascade)
        #expect(model.entity(named: "employee")?.relationship(named: "assignments")?.inverse == "employee")
        #expect(model.references(to: "employee").map(\.entity) == ["assignment"])
    }

    @Test func anExistingDatabaseIsServedAsItIs() throws {
        let url = try TestEnvironment.freshDatabase()
        let connection = try Connection(url)
        try connection.execute("""
            CREATE TABLE author (code text PRIMARY KEY, name text NOT NULL);
            CREATE TABLE book (isbn uuid PRIMARY KEY DEFAULT gen_random_uuid(), title text NOT NULL,
                               written_by text NOT NULL REFERENCES author (code) ON DELETE RESTRICT,
                               editor text REFERENCES author (code) ON DELETE SET NULL);
            COMMENT ON CONSTRAINT book_written_by_fkey ON book IS 'inverse: works';
            CREATE TABLE pair (a int, b int, PRIMARY KEY (a, b));
            """)
        let model = try ModelReflector.reflect(connection)
        #expect(model.entities.map(\.name) == ["author", "book"])
        #expect(model.unserved == [UnservedTable(name: "pair", reason: "composite primary key")])
        let book = try #require(model.entity(named: "book"))
        #expect(book.keySequence == nil)
        #expect(book.primaryKey.kind == .uuid)
        #expect(book.relationship(named: "written_by")?.isRequired == true)
        let author = try #require(model.entity(named: "author"))
        #expect(Set(author.relationships.map(\.name)) == ["works", "books_by_editor"])
    }
}
