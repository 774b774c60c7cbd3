@testable import Records

/// A hand-built model of part of the sample domain, for tests that need no database.
enum SampleModel {
    static func attribute(_ name: String, _ type: String, _ kind: ValueKind, notNull: Bool = false,
                          key: Bool = false, unique: Bool = false, defaultValue: String? = nil) -> Attribute {
        Attribute(name: name, sqlType: type, kind: kind, isNotNull: notNull || key, defaultValue: key ? "identity" : defaultValue,
                  isUnique: unique || key, isPrimaryKey: key, isGenerated: false, comment: nil)
    }

    static let model: Model = {
        let id = attribute("id", "bigint", .integer(bits: 64), key: true)
        let department = Entity(
            name: "department", primaryKey: id,
            attributes: [id, attribute("name", "text", .string, notNull: true), attribute("number", "integer", .integer(bits: 32), notNull: true)],
            relationships: [Relationship(name: "employees", entity: "department", target: "employee", isToMany: true, inverse: "department",
                                         column: "department_id", columnType: "bigint", deleteRule: .cascade, constraint: "employee_department_id_fkey", isRequired: false)],
            keySequence: "public.department_id_seq", comment: nil)
        let employee = Entity(
            name: "employee", primaryKey: id,
            attributes: [id, attribute("first_name", "text", .string, notNull: true), attribute("age", "integer", .integer(bits: 32)),
                         attribute("gender", "smallint", .integer(bits: 16), notNull: true)],
            relationships: [Relationship(name: "department", entity: "employee", target: "department", isToMany: false, inverse: "employees",
                                         column: "department_id", columnType: "bigint", deleteRule: .cascade, constraint: "employee_department_id_fkey", isRequired: false)],
            keySequence: "public.employee_id_seq", comment: nil)
        return Model(schema: "public", entities: [department, employee], unserved: [])
    }()
}
