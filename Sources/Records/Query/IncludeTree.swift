/// The relationships an INCLUDE asks for, as a tree: `employees, employees.department`
/// -> employees { department }. Every name is checked against the model.
struct IncludeTree: Equatable {
    var children: [String: IncludeTree] = [:]
    /// This relationship's records' order and number (a to-many include's).
    var order: IncludeOrder?

    static let maxDepth = 4

    static func parse(_ paths: [String], orders: [String: IncludeOrder] = [:], entity: Entity, model: Model) throws(CommandError) -> IncludeTree {
        var tree = IncludeTree()
        for path in paths {
            let names = path.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            guard names.count <= maxDepth else {
                throw CommandError(.limit, "INCLUDE \(path): at most \(maxDepth) levels")
            }
            try tree.add(names[...], order: orders[path], entity: entity, model: model, path: path)
        }
        return tree
    }

    private mutating func add(_ names: ArraySlice<String>, order: IncludeOrder?, entity: Entity, model: Model, path: String) throws(CommandError) {
        guard let first = names.first else { return }
        guard let relationship = entity.relationship(named: first), let target = model.entity(named: relationship.target) else {
            throw CommandError(.unknown, "cannot include '\(path)': \(entity.name) has no relationship '\(first)'")
        }
        var child = children[relationship.name] ?? IncludeTree()
        if names.count == 1, let order {
            // The sort key is resolved as FIND's are, where the query is built.
            guard relationship.isToMany else { throw CommandError(.syntax, "INCLUDE \(path): ORDER BY and LIMIT apply to a to-many relationship") }
            child.order = order
        }
        try child.add(names.dropFirst(), order: order, entity: target, model: model, path: path)
        children[relationship.name] = child
    }
}
