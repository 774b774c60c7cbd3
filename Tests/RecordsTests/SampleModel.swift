@testable import Records

/// Hand-built models for tests that need no database: part of the sample domain, and tables
/// with every kind of key users have (identity ALWAYS and BY DEFAULT, serial, a uuid with a
/// default, a text key the client gives, a composite key), a self-reference, and two tables that
/// point at each other.
enum SampleModel {
    static func attribute(_ name: String, _ type: String, _ kind: ValueKind, notNull: Bool = false,
                          key: Bool = false, unique: Bool = false, defaultValue: String? = nil,
                          identity: Attribute.Identity? = nil, sequence: String? = nil) -> Attribute {
        Attribute(name: name, sqlType: type, kind: kind, isNotNull: notNull || key,
                  defaultValue: identity != nil ? "identity" : defaultValue, identity: identity,
                  isUnique: unique || key, isPrimaryKey: key, isGenerated: false, comment: nil, sequence: sequence)
    }

    static func toOne(_ name: String, of entity: String, to target: String, inverse: String, column: String,
                      rule: DeleteRule = .cascade, required: Bool = false, deferrable: Bool = false) -> (Relationship, Relationship) {
        let constraint = "\(entity)_\(column)_fkey"
        return (Relationship(name: name, entity: entity, target: target, isToMany: false, inverse: inverse, column: column,
                             referencedColumn: "id", columnType: "bigint", deleteRule: rule, constraint: constraint,
                             isRequired: required, isDeferrable: deferrable),
                Relationship(name: inverse, entity: target, target: entity, isToMany: true, inverse: name, column: column,
                             referencedColumn: "id", columnType: "bigint", deleteRule: rule, constraint: constraint,
                             isRequired: false, isDeferrable: deferrable))
    }

    static let tag = Entity(name: "tag", key: [attribute("label", "text", .string, key: true)],
                            attributes: [attribute("label", "text", .string, key: true), attribute("color", "text", .string)],
                            relationships: [])

    static let model: Model = {
        let departmentID = attribute("id", "bigint", .integer(bits: 64), key: true, identity: .always, sequence: "public.department_id_seq")
        let employeeID = attribute("id", "bigint", .integer(bits: 64), key: true, identity: .byDefault, sequence: "public.employee_id_seq")
        let projectID = attribute("id", "integer", .integer(bits: 32), key: true, defaultValue: "nextval('project_id_seq'::regclass)", sequence: "public.project_id_seq")
        let (employeeDepartment, departmentEmployees) = toOne("department", of: "employee", to: "department", inverse: "employees", column: "department_id")
        let (manager, reports) = toOne("manager", of: "employee", to: "employee", inverse: "reports", column: "manager_id", rule: .nullify)
        let (memberProject, projectMembers) = toOne("project", of: "project_member", to: "project", inverse: "project_members", column: "project_id", rule: .deny, required: true)
        let (memberEmployee, employeeMembers) = toOne("employee", of: "project_member", to: "employee", inverse: "project_members", column: "employee_id", required: true)
        let (aPartner, partnerOfA) = toOne("partner", of: "pa", to: "pb", inverse: "pas", column: "partner_id", rule: .nullify)
        let (bPartner, partnerOfB) = toOne("partner", of: "pb", to: "pa", inverse: "pbs", column: "partner_id", rule: .deny, required: true, deferrable: true)

        let department = Entity(
            name: "department", key: [departmentID],
            attributes: [departmentID, attribute("name", "text", .string, notNull: true), attribute("number", "integer", .integer(bits: 32), notNull: true)],
            relationships: [departmentEmployees])
        let employee = Entity(
            name: "employee", key: [employeeID],
            attributes: [employeeID, attribute("first_name", "text", .string, notNull: true), attribute("age", "integer", .integer(bits: 32)),
                         attribute("gender", "smallint", .integer(bits: 16), notNull: true)],
            relationships: [employeeDepartment, manager, reports, employeeMembers])
        let project = Entity(name: "project", key: [projectID], attributes: [projectID, attribute("name", "text", .string, notNull: true)],
                             relationships: [projectMembers])
        let member = Entity(
            name: "project_member",
            key: [attribute("project_id", "bigint", .integer(bits: 64), key: true), attribute("employee_id", "bigint", .integer(bits: 64), key: true)],
            attributes: [attribute("role", "text", .string)],
            relationships: [memberProject, memberEmployee])
        let bookID = attribute("id", "uuid", .uuid, key: true, defaultValue: "gen_random_uuid()")
        let book = Entity(name: "book", key: [bookID], attributes: [bookID, attribute("title", "text", .string, notNull: true),
                                                                    attribute("isbn", "text", .string, unique: true)],
                          relationships: [], uniqueKeys: [["id"], ["isbn"]])
        let paID = attribute("id", "bigint", .integer(bits: 64), key: true, identity: .byDefault, sequence: "public.pa_id_seq")
        let pbID = attribute("id", "bigint", .integer(bits: 64), key: true, identity: .byDefault, sequence: "public.pb_id_seq")
        let pa = Entity(name: "pa", key: [paID], attributes: [paID], relationships: [aPartner, partnerOfB])
        let pb = Entity(name: "pb", key: [pbID], attributes: [pbID], relationships: [bPartner, partnerOfA])
        return Model(schema: "public", entities: [department, employee, project, member, tag, book, pa, pb], unserved: [])
    }()
}
