import Testing
@testable import Records

/// What a line's `attr=value` names name, planned once a shape (`FieldPlan`) and kept per
/// session (`FieldPlans`): the plan says what the names alone say, and a kept plan is only ever
/// the one its model, entity and names would give again.
@Suite struct FieldPlanTests {
    static func describe(_ target: FieldPlan.Target) -> String {
        if let refusal = target.unsettable { return "refused when set \(refusal.code.rawValue) \(refusal.message)" }
        return switch target.role {
        case .attribute(let acceptsRef): "attribute \(target.column)\(acceptsRef ? " (refs)" : "") as \(target.label)"
        case .relationship(let entity): "relationship \(target.column) to \(entity) as \(target.label)"
        case .refused(let error): "refused \(error.code.rawValue) \(error.message)"
        }
    }

    static func assignments(_ names: [String]) -> [Assignment] {
        names.enumerated().map { Assignment(name: $0.element, value: .number("1"), offset: $0.offset) }
    }

    @Test func eachNameIsPlannedAsTheModelSays() throws {
        let model = SampleModel.model
        let employee = try #require(model.entity(named: "employee"))
        let plan = FieldPlan(names: ["first_name", "department", "manager_id", "MANAGER_ID", "nothing", "reports", "id"], entity: employee, model: model)
        #expect(plan.targets.map(Self.describe) == [
            "attribute first_name as employee.first_name",
            "relationship department_id to department as employee.department",
            "relationship manager_id to employee as employee.manager",
            "relationship manager_id to employee as employee.manager",
            "refused UNKNOWN employee has no attribute or relationship 'nothing'",
            "refused VALIDATION employee.reports is to-many: set employee.manager on each employee instead",
            "attribute id as employee.id",
        ])
        // manager_id twice: reported after the values.
        #expect(plan.twice == "manager_id")
        let department = try #require(model.entity(named: "department"))
        let always = FieldPlan(names: ["id", "name"], entity: department, model: model)
        #expect(always.targets.map(Self.describe) == [
            "refused when set VALIDATION department.id is GENERATED ALWAYS: PostgreSQL gives it, not the client",
            "attribute name as department.name",
        ])
        #expect(always.twice == nil)
    }

    @Test func aKeptPlanIsTheOneItsModelEntityAndNamesGive() throws {
        var plans = FieldPlans()
        let model = SampleModel.model
        var finds = 0
        func plan(_ entity: String, _ names: [String], _ model: Model) throws(CommandError) -> FieldPlan {
            try plans.plan(entity, Self.assignments(names), model: model) { () throws(CommandError) in
                finds += 1
                guard let found = model.entity(named: entity) else { throw CommandError(.unknown, "no \(entity)") }
                return found
            }.1
        }
        let first = try plan("employee", ["first_name", "age"], model)
        #expect(try plan("employee", ["first_name", "age"], model).targets[0] === first.targets[0])
        #expect(finds == 1)
        // Another order, another entity, another spelling of the entity: planned afresh.
        #expect(try plan("employee", ["age", "first_name"], model).targets.map(\.column) == ["age", "first_name"])
        #expect(try plan("employee", ["first_name"], model).targets.map(\.column) == ["first_name"])
        #expect(try plan("Employee", ["first_name", "age"], model).targets[0] !== first.targets[0])
        #expect(finds == 4)
        // A reloaded model (a migration): never a plan of the old one.
        let reloaded = Model(schema: model.schema, entities: model.entities, unserved: [])
        #expect(try plan("employee", ["first_name", "age"], reloaded).targets[0] !== first.targets[0])
        #expect(finds == 5)
        // An unknown entity is the caller's error, and nothing is kept.
        #expect(throws: CommandError.self) { try plan("nothing", ["a"], model) }
        #expect(throws: CommandError.self) { try plan("nothing", ["a"], model) }
        #expect(finds == 7)
    }

    @Test func aSessionKeepsAFewPlansOfAFewNames() throws {
        var plans = FieldPlans()
        let model = SampleModel.model
        let employee = try #require(model.entity(named: "employee"))
        var finds = 0
        func plan(_ names: [String]) -> FieldPlan {
            try! plans.plan("employee", Self.assignments(names), model: model) { () throws(CommandError) in
                finds += 1
                return employee
            }.1
        }
        // Nine shapes through eight places: the first is gone, the last eight stay.
        let shapes = (0...FieldPlans.capacity).map { ["first_name"] + Array(repeating: "age", count: $0) }
        for shape in shapes { _ = plan(shape) }
        #expect(finds == shapes.count)
        for shape in shapes.dropFirst() { _ = plan(shape) }
        #expect(finds == shapes.count)
        _ = plan(shapes[0])
        #expect(finds == shapes.count + 1)
        // A line of many pairs is planned, not kept.
        let long = Array(repeating: "age", count: FieldPlans.maxNames + 1)
        _ = plan(long)
        _ = plan(long)
        #expect(finds == shapes.count + 3)
    }
}
