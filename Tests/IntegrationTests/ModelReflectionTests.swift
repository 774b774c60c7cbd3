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
        #expect(employee.keyColumns == ["id"])
        #expect(employee.key[0].sequence == "public.employee_id_seq")
        #expect(employee.key[0].identity == .byDefault)
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
        #expect(model.foreignKeys(to: "employee").map(\.entity) == ["assignment"])
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
            CREATE TABLE shelf (author_code text REFERENCES author (code), position int, label text UNIQUE,
                                PRIMARY KEY (author_code, position));
            CREATE TABLE loose (note text);
            CREATE TABLE serial_thing (id serial PRIMARY KEY, made bigint GENERATED ALWAYS AS IDENTITY UNIQUE);
            """)
        let model = try ModelReflector.reflect(connection)
        #expect(model.entities.map(\.name) == ["author", "book", "pair", "serial_thing", "shelf"])
        #expect(model.unserved == [UnservedTable(name: "loose", reason: "no primary key")])
        let book = try #require(model.entity(named: "book"))
        #expect(book.key[0].sequence == nil)
        #expect(book.key[0].kind == .uuid)
        #expect(book.key[0].allocation == .expression("gen_random_uuid()"))
        let pair = try #require(model.entity(named: "pair"))
        #expect(pair.keyColumns == ["a", "b"])
        #expect(pair.key.allSatisfy { $0.allocation == nil })
        let shelf = try #require(model.entity(named: "shelf"))
        #expect(shelf.keyColumns == ["author_code", "position"])
        #expect(shelf.relationship(named: "author_code")?.referencedColumn == "code")
        #expect(shelf.attributes.map(\.name) == ["position", "label"])
        #expect(shelf.uniqueKeys == [["author_code", "position"], ["label"]])
        let serial = try #require(model.entity(named: "serial_thing"))
        #expect(serial.key[0].allocation == .sequence("public.serial_thing_id_seq"))
        #expect(serial.attribute(named: "made")?.identity == .always)
        #expect(book.relationship(named: "written_by")?.isRequired == true)
        let author = try #require(model.entity(named: "author"))
        #expect(Set(author.relationships.map(\.name)) == ["works", "books_by_editor", "shelfs"])
    }
}
