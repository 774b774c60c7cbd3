/// A pending insert: the fields the client set, by column.
public struct PendingInsert: Sendable, Equatable {
    public var ref: String
    public var entity: String
    /// Column -> value, in the order the client set them.
    public var fields: [(column: String, value: FieldValue)]

    public static func == (a: PendingInsert, b: PendingInsert) -> Bool {
        a.ref == b.ref && a.entity == b.entity && a.fields.elementsEqual(b.fields, by: { $0.column == $1.column && $0.value == $1.value })
    }

    mutating func set(_ column: String, _ value: FieldValue) {
        if let i = fields.firstIndex(where: { $0.column == column }) { fields[i].value = value } else { fields.append((column, value)) }
    }

    public func value(of column: String) -> FieldValue? { fields.first { $0.column == column }?.value }
}

/// A pending update of a stored record, with the version and values it was read with.
public struct PendingUpdate: Sendable, Equatable {
    public var entity: String
    public var id: String
    /// `xmin` when read: another session's save changes it.
    public var version: String
    /// Every column's text when read, for CHANGES (old -> new) and three-way conflicts.
    public var baseline: [String: String?]
    public var fields: [String: FieldValue]
    /// Column order as first set, for stable output.
    public var order: [String]

    mutating func set(_ column: String, _ value: FieldValue) {
        if fields[column] == nil { order.append(column) }
        fields[column] = value
    }
}

/// A pending delete of a stored record.
public struct PendingDelete: Sendable, Equatable {
    public var entity: String
    public var id: String
    public var version: String
}

/// Identifies a stored record: entity and primary key text.
public struct RecordKey: Hashable, Sendable {
    public var entity: String
    public var id: String
}

/// One layer of changes. Value semantics make nested scratchpads a copy (shared storage until
/// the child writes), and MERGE a replacement.
public struct ChangeSet: Sendable, Equatable {
    public private(set) var inserts: [PendingInsert] = []
    private var insertIndex: [String: Int] = [:]
    public private(set) var updates: [RecordKey: PendingUpdate] = [:]
    public private(set) var updateOrder: [RecordKey] = []
    public private(set) var deletes: [RecordKey: PendingDelete] = [:]
    public private(set) var deleteOrder: [RecordKey] = []
    var nextRef = 1

    public var count: Int { inserts.count + updates.count + deletes.count }
    public var isEmpty: Bool { count == 0 }

    public func insert(_ ref: String) -> PendingInsert? { insertIndex[ref].map { inserts[$0] } }

    /// A fresh `#ref` name for an insert the client did not name: `e1` for employee, ...
    mutating func generatedRef(for entity: String) -> String {
        let prefix = String(entity.prefix(1))
        while true {
            let candidate = "\(prefix)\(nextRef)"
            nextRef += 1
            if insertIndex[candidate] == nil { return candidate }
        }
    }

    mutating func add(_ insert: PendingInsert) {
        insertIndex[insert.ref] = inserts.count
        inserts.append(insert)
    }

    mutating func updateInsert(_ ref: String, _ body: (inout PendingInsert) -> Void) {
        guard let i = insertIndex[ref] else { return }
        body(&inserts[i])
    }

    mutating func removeInsert(_ ref: String) {
        guard let i = insertIndex.removeValue(forKey: ref) else { return }
        inserts.remove(at: i)
        for j in i..<inserts.count { insertIndex[inserts[j].ref] = j }
    }

    mutating func setUpdate(_ update: PendingUpdate) {
        let key = RecordKey(entity: update.entity, id: update.id)
        if updates[key] == nil { updateOrder.append(key) }
        updates[key] = update
    }

    mutating func removeUpdate(_ key: RecordKey) {
        if updates.removeValue(forKey: key) != nil { updateOrder.removeAll { $0 == key } }
    }

    mutating func addDelete(_ delete: PendingDelete) {
        let key = RecordKey(entity: delete.entity, id: delete.id)
        if deletes[key] == nil { deleteOrder.append(key) }
        deletes[key] = delete
    }

    /// Pending inserts whose to-one fields point at `ref`.
    func inserts(referencing ref: String) -> [PendingInsert] {
        inserts.filter { $0.fields.contains { $0.value == .ref(ref) } }
    }
}

/// The session's unit of work: a stack of scratchpads. The bottom one is what SAVE writes;
/// NEST pushes a copy, MERGE folds the top into its parent, DISCARD drops it.
public struct UnitOfWork: Sendable {
    public private(set) var layers: [ChangeSet] = [ChangeSet()]

    public init() {}

    /// Mutated in place (`_modify`): a get/set pair would copy the whole change set on every
    /// edit, making a unit of n inserts cost O(n²).
    public var current: ChangeSet {
        get { layers[layers.count - 1] }
        _modify { yield &layers[layers.count - 1] }
    }

    /// Scratchpads open above the unit itself.
    public var depth: Int { layers.count - 1 }

    public mutating func nest() { layers.append(current) }

    /// Folds the innermost scratchpad into its parent; false when none is open.
    public mutating func merge() -> Bool {
        guard depth > 0 else { return false }
        let top = layers.removeLast()
        current = top
        return true
    }

    public mutating func discard() -> Bool {
        guard depth > 0 else { return false }
        layers.removeLast()
        return true
    }

    public mutating func rollback() { layers = [ChangeSet()] }

    /// After a successful SAVE.
    mutating func saved() { layers = [ChangeSet()] }
}
