/// The session's unit of work: a stack of scratchpads, the bottom one what SAVE writes (NEST
/// pushes a copy, MERGE folds the top into its parent, DISCARD drops it); the keys its pending
/// inserts were given; and the versions of the records it read.
public struct UnitOfWork: Sendable, Codable {
    public private(set) var layers: [ChangeSet] = [ChangeSet()]
    /// Key values given to pending inserts before SAVE (by a read that showed them, or a SAVE
    /// that failed), by `#ref`: a pending insert keeps the id it was first shown.
    public private(set) var assigned: [String: AssignedKey] = [:]
    /// The version each record had when this unit read it (GET, FIND).
    public private(set) var reads = ReadVersions()
    /// Stored records an UPSERT found and named (`UPSERT genre AS #rock ON code ...`), by
    /// name: later lines use the name as they use a pending insert's #ref, so a script that
    /// upserts and relates works whether the record was there or not. Until SAVE or ROLLBACK.
    public private(set) var found: [String: FoundRecord] = [:]

    public init() {}

    private enum CodingKeys: String, CodingKey { case layers, assigned, reads, found }

    /// A unit handed on by a build without `found` reads as one with none.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        layers = try container.decode([ChangeSet].self, forKey: .layers)
        assigned = try container.decode([String: AssignedKey].self, forKey: .assigned)
        reads = try container.decode(ReadVersions.self, forKey: .reads)
        found = try container.decodeIfPresent([String: FoundRecord].self, forKey: .found) ?? [:]
    }

    /// Names a stored record an UPSERT found.
    mutating func name(_ ref: String, _ record: FoundRecord) { found[ref] = record }

    /// Mutated in place (`_modify`): a get/set pair would copy the whole change set on every
    /// edit, making a unit of n inserts cost O(n²). Read in place too (`_read`): a getter
    /// copied the struct, a retain and a release for each of its collections, to ask its count
    /// or a #ref's entity on every INSERT line.
    public var current: ChangeSet {
        _read { yield layers[layers.count - 1] }
        _modify { yield &layers[layers.count - 1] }
    }

    /// Scratchpads open above the unit itself.
    public var depth: Int { layers.count - 1 }

    /// Pending changes held in memory: a nested scratchpad is a copy of its parent, so each
    /// layer counts in full (what `--max-pending` bounds).
    public var heldCount: Int { layers.reduce(0) { $0 + $1.count } }
    /// Bytes of values held, every layer in full (what `--max-pending-bytes` bounds).
    public var heldBytes: Int { layers.reduce(0) { $0 + $1.bytes } }

    /// Scratchpads nested deeper than this are refused.
    public static let maxDepth = 16

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
        pruneAssigned()
        // A name an UPSERT in the scratchpad gave goes with its update.
        if !found.isEmpty { found = found.filter { _, record in layers.contains { $0.updates[record.key] != nil } } }
        return true
    }

    /// Drops every pending change and forgets what was read.
    public mutating func rollback() {
        layers = [ChangeSet()]
        assigned = [:]
        reads.removeAll()
        found = [:]
    }

    /// After a successful SAVE: what it wrote has new versions (records changed by predicate,
    /// by a cascade or a nil-setting rule included), so what was read is forgotten.
    mutating func saved() {
        layers = [ChangeSet()]
        assigned = [:]
        reads.removeAll()
        found = [:]
    }

    /// Keys a read or a SAVE gave to pending inserts; the first given stays.
    mutating func assign(_ keys: [String: AssignedKey]) {
        for (ref, key) in keys {
            guard current.insertEntity(ref) == key.entity else { continue }
            if let known = assigned[ref], known.entity == key.entity {
                assigned[ref] = AssignedKey(entity: key.entity, values: key.values.merging(known.values) { _, old in old })
            } else {
                assigned[ref] = key
            }
        }
    }

    /// Lets go of the keys given to these pending inserts: the next read or SAVE gives new ones.
    mutating func release(_ refs: [String]) {
        for ref in refs { assigned[ref] = nil }
    }

    mutating func recordReads(_ versions: [(RecordKey, String)]) {
        for (key, version) in versions { reads.record(key, version) }
    }

    /// The keys of pending inserts that no scratchpad holds any more are dropped.
    private mutating func pruneAssigned() {
        guard !assigned.isEmpty else { return }
        assigned = assigned.filter { ref, key in layers.contains { $0.insert(ref)?.entity == key.entity } }
    }
}

/// A stored record an UPSERT found and named: its key, and its columns' values as read (a
/// relationship may reference a unique column other than the key).
public struct FoundRecord: Sendable, Equatable, Codable {
    public var key: RecordKey
    public var values: ColumnValues

    public init(key: RecordKey, values: ColumnValues) {
        self.key = key
        self.values = values
    }
}

/// Key values given to one pending insert before SAVE, by column.
public struct AssignedKey: Sendable, Equatable, Codable {
    public var entity: String
    public var values: ColumnValues

    public init(entity: String, values: ColumnValues) {
        self.entity = entity
        self.values = values
    }

    /// `newer`'s values over these, column by column (most often nothing was known of the
    /// key a value is drawn for: `newer` as it is).
    func updated(with newer: AssignedKey) -> AssignedKey {
        guard !values.isEmpty else { return newer }
        return AssignedKey(entity: newer.entity, values: values.merging(newer.values) { _, latest in latest })
    }
}

/// The versions (`xmin`) of the records a unit read, so that a record it reads and then
/// changes is checked against what it saw. Bounded: past `limit` records the oldest reads are
/// forgotten, and such a record is checked against the version it has at UPDATE or DELETE.
public struct ReadVersions: Sendable, Codable {
    public static let limit = 10_000
    private var versions: [RecordKey: String] = [:]
    /// Keys in the order read; may hold keys read again or forgotten, compacted as it grows.
    private var order: [RecordKey] = []
    private var head = 0

    public var count: Int { versions.count }

    public func version(of key: RecordKey) -> String? { versions[key] }

    mutating func record(_ key: RecordKey, _ version: String) {
        if versions.updateValue(version, forKey: key) == nil { order.append(key) }
        while versions.count > Self.limit, head < order.count {
            versions[order[head]] = nil
            head += 1
        }
        if head > Self.limit {
            order.removeFirst(head)
            head = 0
        }
    }

    mutating func removeAll() {
        versions = [:]
        order = []
        head = 0
    }
}
