/// Tab completion by position, decided from the line and what is known of the schema, without
/// I/O (the shell asks, then shows): a verb first; an entity where the verb names one; after
/// it, the verb's keywords and the entity's attributes and relationships; after a `.`, those of
/// the relationship's target; a verb after HELP. The schema is asked for lazily (`describe`).
public struct TabCompletion: Sendable {
    /// One entity as DESCRIBE tells it: attribute names, and relationships with their target.
    public struct EntityShape: Sendable, Equatable {
        public var attributes: [String]
        public var relationships: [(name: String, target: String)]
        public init(attributes: [String], relationships: [(name: String, target: String)]) {
            self.attributes = attributes
            self.relationships = relationships
        }
        public static func == (a: EntityShape, b: EntityShape) -> Bool {
            a.attributes == b.attributes && a.relationships.map(\.name) == b.relationships.map(\.name)
                && a.relationships.map(\.target) == b.relationships.map(\.target)
        }
    }

    public var entities: [String]

    public init(entities: [String]) { self.entities = entities }

    /// The candidates for `word`, the word being typed after `before` (the line up to it);
    /// sorted, each once. `shape` tells an entity's attributes and relationships (nil: unknown).
    public func candidates(before: String, word: String, shape: (String) -> EntityShape?) -> [String] {
        let words = before.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
        func matching(_ names: [String], prefix: String = "") -> [String] {
            let lower = word.lowercased()
            return Array(Set(names.map { prefix + $0 }.filter { $0.lowercased().hasPrefix(lower) })).sorted()
        }
        guard let first = words.first else { return matching(Verb.allCases.map(\.rawValue)) }
        guard let verb = Verb(rawValue: first.uppercased()) else { return [] }
        switch verb.facts.completes {
        case .nothing: return []
        case .verb: return words.count == 1 ? matching(Verb.allCases.map(\.rawValue)) : []
        case .entity: break
        }
        guard words.count > 1 else { return matching(entities) }
        guard let entity = entities.first(where: { $0.lowercased() == words[1].lowercased() }) else { return [] }
        // A key path: walk its relationships to the entity whose names come after the last dot.
        if let dot = word.lastIndex(of: ".") {
            var current = entity
            for step in word[..<dot].split(separator: ".") {
                guard let next = shape(current)?.relationships.first(where: { $0.name.lowercased() == step.lowercased() }) else { return [] }
                current = next.target
            }
            guard let target = shape(current) else { return [] }
            let head = String(word[...dot])
            return matching(target.attributes + target.relationships.map(\.name) + ["@count"], prefix: head)
        }
        let here = shape(entity)
        return matching(verb.facts.keywords + (here?.attributes ?? []) + (here?.relationships.map(\.name) ?? []))
    }
}
