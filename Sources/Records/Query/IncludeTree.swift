/// The relationships an INCLUDE asks for, as a tree: `employees, employees.department`
/// -> employees { department }. Every name is checked against the model.
struct IncludeTree: Equatable {
    var children: [String: IncludeTree] = [:]

    static let maxDepth = 4

    static func parse(_ paths: [String], entity: Entity, model: Model) throws(CommandError) -> IncludeTree {
        var tree = IncludeTree()
        for path in paths {
            let names = path.split(separator: ".", omittingEmptySubsequences: false).map(String.init)
            guard names.count <= maxDepth else {
                throw CommandError(.limit, "INCLUDE \(path): at most \(maxDepth) levels")
            }
            try tree.add(names[...], entity: entity, model: model, path: path)
        }
        return tree
    }

    private mutating func add(_ names: ArraySlice<String>, entity: Entity, model: Model, path: String) throws(CommandError) {
        guard let first = names.first else { return }
        guard let relationship = entity.relationship(named: first), let target = model.entity(named: relationship.target) else {
            throw CommandError(.unknown, "cannot include '\(path)': \(entity.name) has no relationship '\(first)'")
        }
        var child = children[relationship.name] ?? IncludeTree()
        try child.add(names.dropFirst(), entity: target, model: model, path: path)
        children[relationship.name] = child
    }
}
