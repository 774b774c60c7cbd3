/// What a user may do; each role includes the ones below it.
public enum Role: Int, Comparable, Sendable, CaseIterable {
    case reader = 1, writer, admin

    public static func < (a: Role, b: Role) -> Bool { a.rawValue < b.rawValue }

    public var name: String { ["", "reader", "writer", "admin"][rawValue] }

    public init?(name: String) {
        guard let role = Role.allCases.first(where: { $0.name == name.lowercased() }) else { return nil }
        self = role
    }
}

extension Verb {
    /// The role a verb needs; nil for the verbs open before AUTH.
    public var requiredRole: Role? {
        switch self {
        case .help, .ping, .quit, .auth: nil
        case .info, .entities, .describe, .get, .find, .count, .explain, .watch, .unwatch, .export: .reader
        case .insert, .update, .delete, .upsert, .changes, .save, .rollback, .nest, .merge, .discard, .import: .writer
        case .user: .admin
        }
    }
}
