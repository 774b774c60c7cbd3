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
