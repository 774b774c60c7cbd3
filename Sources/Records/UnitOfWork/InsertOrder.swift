/// Orders entities so that every record is inserted after the records it points at
/// (a department before its employees, whatever order the client typed).
enum InsertOrder {
    /// `entities` sorted by foreign-key dependency among themselves (Kahn's algorithm);
    /// self-references are ignored, since one multi-row INSERT checks its keys at the end.
    /// Entities in a cycle keep their given order, after the rest.
    static func sorted(_ entities: [String], dependencies: (String) -> [String]) -> [String] {
        let members = Set(entities)
        var remaining = entities
        var placed: Set<String> = []
        var order: [String] = []
        while !remaining.isEmpty {
            guard let next = remaining.firstIndex(where: { entity in
                dependencies(entity).allSatisfy { $0 == entity || placed.contains($0) || !members.contains($0) }
            }) else {
                order.append(contentsOf: remaining)  // a cycle: nothing left without pending parents
                break
            }
            let entity = remaining.remove(at: next)
            placed.insert(entity)
            order.append(entity)
        }
        return order
    }
}
