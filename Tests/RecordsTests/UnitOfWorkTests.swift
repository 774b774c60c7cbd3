import Testing
@testable import Records

@Suite struct UnitOfWorkTests {
    private func insert(_ ref: String, _ entity: String = "game") -> PendingInsert {
        PendingInsert(ref: ref, entity: entity, fields: [("name", .text(ref))])
    }

    @Test func nestedScratchpadDiscardLeavesParentAlone() {
        var unit = UnitOfWork()
        unit.current.add(insert("a"))
        unit.nest()
        unit.current.add(insert("b"))
        #expect(unit.current.count == 2)
        let discarded = unit.discard()
        #expect(discarded)
        #expect(unit.current.inserts.map(\.ref) == ["a"])
        let again = unit.discard()
        #expect(!again)
    }

    @Test func mergeFoldsChildIntoParentAtAnyDepth() {
        var unit = UnitOfWork()
        unit.nest()
        unit.current.add(insert("a"))
        unit.nest()
        unit.current.add(insert("b"))
        #expect(unit.depth == 2)
        let first = unit.merge(), second = unit.merge()
        #expect(first && second)
        #expect(unit.depth == 0)
        #expect(unit.current.inserts.map(\.ref) == ["a", "b"])
    }

    @Test func generatedRefsSkipTakenNames() {
        var set = ChangeSet()
        set.add(insert("g1"))
        let ref = set.addGenerated(entity: "game", fields: [])
        #expect(ref == "g2")
    }

    @Test func removingAnInsertKeepsTheIndex() {
        var set = ChangeSet()
        ["a", "b", "c"].forEach { set.add(insert($0)) }
        set.removeInsert("a")
        #expect(set.insert("c")?.ref == "c")
        #expect(set.insert("a") == nil)
    }

    @Test func entityOrderPutsParentsFirst() {
        let order = InsertLayout.entityOrder(model: SampleModel.model, names: ["project_member", "employee", "department", "project"])
        #expect(order.count == 4)
        #expect(order.firstIndex(of: "department")! < order.firstIndex(of: "employee")!)
        #expect(order.firstIndex(of: "employee")! < order.firstIndex(of: "project_member")!)
        #expect(order.firstIndex(of: "project")! < order.firstIndex(of: "project_member")!)
    }
}
