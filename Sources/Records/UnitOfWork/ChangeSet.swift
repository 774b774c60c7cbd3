/// A pending insert: the fields the client set, by column.
public struct PendingInsert: Sendable, Equatable {
    public var ref: String
    public var entity: String
    /// Column -> value, in the order the client set them.
    public var fields: [(column: String, value: FieldValue)]

    public init(ref: String, entity: String, fields: [(column: String, value: FieldValue)]) {
        self.ref = ref
        self.entity = entity
        self.fields = fields
    }

    public static func == (a: PendingInsert, b: PendingInsert) -> Bool {
        a.ref == b.ref && a.entity == b.entity && a.fields.elementsEqual(b.fields, by: { $0.column == $1.column && $0.value == $1.value })
    }

    mutating func set(_ column: String, _ value: FieldValue) {
        if let i = fields.firstIndex(where: { $0.column == column }) { fields[i].value = value } else { fields.append((column, value)) }
    }

    public func value(of column: String) -> FieldValue? { fields.first { $0.column == column }?.value }

    /// Whether the fields set are `columns`, in order: rows typed alike (a run of a load) are
    /// recognised by walking, with no array made a row.
    func sets(exactly columns: [String]) -> Bool {
        guard fields.count == columns.count else { return false }
        for index in columns.indices where fields[index].column != columns[index] { return false }
        return true
    }

    /// The pending records this insert points at.
    var refs: [String] { fields.compactMap { if case .ref(let r) = $0.value { r } else { nil } } }

    var bytes: Int { ref.utf8.count + entity.utf8.count + fields.reduce(0) { $0 + $1.column.utf8.count + $1.value.bytes } }
}

extension FieldValue {
    var bytes: Int {
        switch self {
        case .null: 1
        case .text(let text): text.utf8.count
        case .ref(let ref): ref.utf8.count
        }
    }
}

extension RecordKey {
    var bytes: Int { entity.utf8.count + values.reduce(0) { $0 + $1.utf8.count } }
}

/// A pending update of a stored record, with the version and values it was read with.
public struct PendingUpdate: Sendable, Equatable, Codable {
    public var key: RecordKey
    /// `xmin` when this unit read the record: another session's save changes it.
    public var version: String
    /// The record had changed since this unit first read it (GET, FIND) by the time of the
    /// UPDATE: only `SAVE FORCE` writes over that change, which this unit never saw.
    public var changedSinceRead: Bool
    /// Every column's text at the UPDATE, for CHANGES (old -> new) and three-way conflicts.
    public var baseline: [String: String?]
    public var fields: [String: FieldValue]
    /// Column order as first set, for stable output.
    public var order: [String]

    public var entity: String { key.entity }

    public init(key: RecordKey, version: String, changedSinceRead: Bool = false, baseline: [String: String?]) {
        self.key = key
        self.version = version
        self.changedSinceRead = changedSinceRead
        self.baseline = baseline
        self.fields = [:]
        self.order = []
    }

    mutating func set(_ column: String, _ value: FieldValue) {
        if fields[column] == nil { order.append(column) }
        fields[column] = value
    }

    /// Values held, the baseline (the record as read) included.
    var bytes: Int {
        key.bytes + version.utf8.count
            + fields.reduce(0) { $0 + $1.key.utf8.count + $1.value.bytes }
            + baseline.reduce(0) { $0 + $1.key.utf8.count + ($1.value?.utf8.count ?? 1) }
    }
}

/// A pending delete of a stored record.
public struct PendingDelete: Sendable, Equatable, Codable {
    public var key: RecordKey
    public var version: String
    public var changedSinceRead: Bool = false

    public var entity: String { key.entity }
}

/// `UPDATE entity WHERE predicate SET ...` or `DELETE entity WHERE predicate`: a change to
/// whatever records match when it is applied (as EF Core's ExecuteUpdate and Core Data's batch
/// requests), without version checks.
public struct BulkChange: Sendable, Equatable, Codable {
    public enum Kind: Sendable, Equatable, Codable {
        case update([FieldAssignment])
        case delete
    }

    public var entity: String
    public var predicate: Predicate
    public var kind: Kind
    /// How CHANGES shows it.
    public var text: String

    public var isDelete: Bool { kind == .delete }

    /// The pending records its values point at.
    var refs: [String] {
        guard case .update(let fields) = kind else { return [] }
        return fields.compactMap { if case .ref(let r) = $0.value { r } else { nil } }
    }
}

/// A column and the value it is set to.
public struct FieldAssignment: Sendable, Equatable, Codable {
    public var column: String
    public var value: FieldValue
}

/// One layer of changes. Value semantics make nested scratchpads a copy (shared storage until
/// the child writes), and MERGE a replacement.
public struct ChangeSet: Sendable, Equatable, Codable {
    public private(set) var inserts: [PendingInsert] = []
    /// A pending insert's serial: given once, never changed, rising with `inserts`' order. A
    /// dropped insert leaves the others' serials as they are (renumbering every later one made
    /// dropping inserts one by one quadratic).
    private var insertIndex: [String: Int] = [:]
    /// The serial of the insert named by generated number n (`e12`: 12), -1 when none: the
    /// names the server gives stay out of `insertIndex`, whose hashing and growth were a
    /// tenth of a pipelined INSERT line's cost on a large unit. Names the client gives, and
    /// every name of a unit decoded, are in `insertIndex`.
    private var generated: [Int] = []
    /// The serial of each of `inserts`, in order: where a serial is, by one comparison while no
    /// insert was dropped, else by binary search.
    private var serials: [Int] = []
    /// How many pending changes point at each pending insert (derived, never coded): DELETE of
    /// an insert nothing points at asks no scan of the unit. Counted from the first such
    /// DELETE on, so that a load's INSERT lines pay nothing for it.
    private var referrers: [String: Int]?
    public private(set) var updates: [RecordKey: PendingUpdate] = [:]
    public private(set) var updateOrder: [RecordKey] = []
    public private(set) var deletes: [RecordKey: PendingDelete] = [:]
    public private(set) var deleteOrder: [RecordKey] = []
    public private(set) var bulk: [BulkChange] = []
    var nextRef = 1
    /// Bytes of the names and values held (what `--max-pending-bytes` bounds), kept up to date
    /// by every change.
    public private(set) var bytes = 0

    public init() {}

    public var count: Int { inserts.count + updates.count + deletes.count + bulk.count }
    public var isEmpty: Bool { count == 0 }

    public func insert(_ ref: String) -> PendingInsert? { place(of: ref).map { inserts[$0] } }

    /// Where the pending insert `ref` names is in `inserts`.
    func place(of ref: String) -> Int? { locate(ref)?.place }

    /// Where the insert `ref` names is, and its generated number when the unit gave the name.
    private func locate(_ ref: String) -> (place: Int, generated: Int?)? {
        if !generated.isEmpty, let number = Self.generatedNumber(ref), number < generated.count, generated[number] >= 0 {
            let place = place(ofSerial: generated[number])
            if place < inserts.count && inserts[place].ref == ref { return (place, number) }
        }
        guard let serial = insertIndex[ref] else { return nil }
        return (place(ofSerial: serial), nil)
    }

    /// Where the insert with this serial is.
    private func place(ofSerial serial: Int) -> Int {
        if serial < serials.count && serials[serial] == serial { return serial }
        var low = 0, high = min(serial, serials.count - 1)
        while low < high {
            let middle = (low + high) / 2
            if serials[middle] < serial { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// The entity of the pending insert `ref` names, without copying the insert (asked for
    /// every `#ref` of every line and every SAVE).
    public func insertEntity(_ ref: String) -> String? { place(of: ref).map { inserts[$0].entity } }

    private var nextSerial: Int { (serials.last ?? -1) + 1 }

    private mutating func count(refsOf fields: [(column: String, value: FieldValue)], _ delta: Int) {
        guard referrers != nil else { return }
        for field in fields { if case .ref(let target) = field.value { count(target, delta) } }
    }

    private mutating func count(refsOf update: PendingUpdate, _ delta: Int) {
        guard referrers != nil else { return }
        for value in update.fields.values { if case .ref(let target) = value { count(target, delta) } }
    }

    private mutating func count(refsOf change: BulkChange, _ delta: Int) {
        guard referrers != nil else { return }
        for target in change.refs { count(target, delta) }
    }

    private mutating func count(_ target: String, _ delta: Int) {
        let uses = referrers![target, default: 0] + delta
        referrers![target] = uses == 0 ? nil : uses
    }

    /// The number after a name's first character (`refName`'s), if that is all digits: the
    /// name is then looked for among the generated ones, and taken only if it is the very name.
    private static func generatedNumber(_ ref: String) -> Int? {
        Int(Substring(ref.utf8.dropFirst())) ?? Int(ref.dropFirst())
    }

    /// Appends an insert under the next serial (its `#ref` already claimed).
    private mutating func append(_ insert: PendingInsert, serial: Int) {
        inserts.append(insert)
        serials.append(serial)
        count(refsOf: insert.fields, 1)
        bytes += insert.bytes
    }

    /// The name `addGenerated` will give the next insert of `entity` (an UPSERT answers with
    /// it before its insert is added, the session running nothing in between).
    func nextGeneratedName(_ entity: String) -> String { freeName(entity).name }

    /// Adds an insert the client did not name under a fresh `#ref` (`e1` for employee, ...),
    /// which it returns: the name claimed with one hashed probe (every pipelined INSERT line
    /// comes here).
    mutating func addGenerated(entity: String, fields: [(column: String, value: FieldValue)]) -> String {
        let (number, name) = freeName(entity)
        nextRef = number + 1
        let serial = nextSerial
        while generated.count < number { generated.append(-1) }
        generated.append(serial)
        append(PendingInsert(ref: name, entity: entity, fields: fields), serial: serial)
        return name
    }

    /// The first number from `nextRef` on whose name no insert has (one the client gave, or a
    /// decoded unit's, may hold the next).
    private func freeName(_ entity: String) -> (number: Int, name: String) {
        var number = nextRef
        while true {
            let name = Self.refName(entity, number)
            if insertIndex.isEmpty || insertIndex[name] == nil { return (number, name) }
            number += 1
        }
    }

    /// The entity's first character and `number`, written into one buffer (no interpolation,
    /// no grapheme breaking for an ASCII first letter; CR LF aside, which no name holds).
    private static func refName(_ entity: String, _ number: Int) -> String {
        let bytes = entity.utf8
        guard let first = bytes.first, first < 0x80, first != 13,
              bytes.count == 1 || bytes[bytes.index(after: bytes.startIndex)] < 0x80 else {
            return String(entity.prefix(1)) + String(number)
        }
        return withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 24) { buffer in
            var end = 24
            var rest = UInt(max(number, 0))
            repeat {
                end -= 1
                buffer[end] = UInt8(48 + rest % 10)
                rest /= 10
            } while rest > 0
            end -= 1
            buffer[end] = first
            return String(decoding: UnsafeBufferPointer(rebasing: buffer[end...]), as: UTF8.self)
        }
    }

    mutating func add(_ insert: PendingInsert) {
        let serial = nextSerial
        insertIndex[insert.ref] = serial
        append(insert, serial: serial)
    }

    mutating func updateInsert(_ ref: String, _ body: (inout PendingInsert) -> Void) {
        guard let i = place(of: ref) else { return }
        bytes -= inserts[i].bytes
        count(refsOf: inserts[i].fields, -1)
        body(&inserts[i])
        count(refsOf: inserts[i].fields, 1)
        bytes += inserts[i].bytes
    }

    mutating func removeInsert(_ ref: String) {
        guard let (i, number) = locate(ref) else { return }
        if let number { generated[number] = -1 } else { insertIndex[ref] = nil }
        bytes -= inserts[i].bytes
        count(refsOf: inserts[i].fields, -1)
        inserts.remove(at: i)
        serials.remove(at: i)
    }

    mutating func setUpdate(_ update: PendingUpdate) {
        if let old = updates[update.key] {
            bytes -= old.bytes
            count(refsOf: old, -1)
        } else {
            updateOrder.append(update.key)
        }
        updates[update.key] = update
        count(refsOf: update, 1)
        bytes += update.bytes
    }

    mutating func removeUpdate(_ key: RecordKey) {
        if let old = updates.removeValue(forKey: key) {
            bytes -= old.bytes
            count(refsOf: old, -1)
            updateOrder.removeAll { $0 == key }
        }
    }

    mutating func addDelete(_ delete: PendingDelete) {
        if deletes[delete.key] == nil {
            deleteOrder.append(delete.key)
            bytes += delete.key.bytes
        }
        deletes[delete.key] = delete
    }

    mutating func addBulk(_ change: BulkChange) {
        bulk.append(change)
        count(refsOf: change, 1)
        bytes += change.text.utf8.count
    }

    /// Identifies what the change set changes (not how it was typed in detail): the same
    /// changes give the same fingerprint in any session. FNV-1a, 64 bits, as hex.
    public var fingerprint: String {
        var text = ""
        func field(_ column: String, _ value: FieldValue) -> String {
            switch value {
            case .null: return column + "\u{1}nil"
            case .text(let t): return column + "\u{1}=" + t
            case .ref(let r): return column + "\u{1}#" + r
            }
        }
        for insert in inserts {
            text += "i\u{0}" + insert.ref + "\u{0}" + insert.entity + "\u{0}"
                + insert.fields.map { field($0.column, $0.value) }.sorted().joined(separator: "\u{0}") + "\n"
        }
        for key in updateOrder {
            let update = updates[key]!
            text += "u\u{0}" + key.entity + "\u{0}" + key.values.joined(separator: "\u{0}") + "\u{0}"
                + update.fields.map { field($0.key, $0.value) }.sorted().joined(separator: "\u{0}") + "\n"
        }
        for change in bulk { text += "b\u{0}" + change.text + "\n" }
        for key in deleteOrder { text += "d\u{0}" + key.entity + "\u{0}" + key.values.joined(separator: "\u{0}") + "\n" }
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in text.utf8 { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        return String(hash, radix: 16)
    }

    /// The pending changes that point at the pending insert `ref`, as the client names them:
    /// the first `limit` found, and whether there are more (a refusal names a few, not the
    /// 50,000 records of a load that point at one). An insert pointing at itself goes with it.
    mutating func dependents(of ref: String, limit: Int = 8) -> (names: [String], more: Bool) {
        if referrers == nil {
            referrers = [:]
            for insert in inserts { count(refsOf: insert.fields, 1) }
            for key in updateOrder { count(refsOf: updates[key]!, 1) }
            for change in bulk { count(refsOf: change, 1) }
        }
        guard referrers![ref] != nil else { return ([], false) }
        // One past the limit says whether there are more; the search stops there.
        var names: [String] = []
        for insert in inserts where insert.ref != ref && insert.fields.contains(where: { $0.value == .ref(ref) }) {
            names.append("#" + insert.ref)
            if names.count > limit { break }
        }
        for key in updateOrder where names.count <= limit && updates[key]!.fields.values.contains(.ref(ref)) {
            names.append("update \(key.entity) \(key.values.joined(separator: ","))")
            if names.count > limit { break }
        }
        for change in bulk where names.count <= limit && change.refs.contains(ref) {
            names.append(change.text)
            if names.count > limit { break }
        }
        return (Array(names.prefix(limit)), names.count > limit)
    }
}

/// Coded as before serials: `insertIndex` as places in `inserts`, so that a unit handed to or
/// from another build reads the same. Equal when the changes are (serials are a history).
extension ChangeSet {
    private enum CodingKeys: String, CodingKey {
        case inserts, insertIndex, updates, updateOrder, deletes, deleteOrder, bulk, nextRef, bytes
    }

    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        inserts = try container.decode([PendingInsert].self, forKey: .inserts)
        updates = try container.decode([RecordKey: PendingUpdate].self, forKey: .updates)
        updateOrder = try container.decode([RecordKey].self, forKey: .updateOrder)
        deletes = try container.decode([RecordKey: PendingDelete].self, forKey: .deletes)
        deleteOrder = try container.decode([RecordKey].self, forKey: .deleteOrder)
        bulk = try container.decode([BulkChange].self, forKey: .bulk)
        nextRef = try container.decode(Int.self, forKey: .nextRef)
        bytes = try container.decode(Int.self, forKey: .bytes)
        serials = Array(inserts.indices)
        for (place, insert) in inserts.enumerated() { insertIndex[insert.ref] = place }
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(inserts, forKey: .inserts)
        try container.encode(Dictionary(uniqueKeysWithValues: inserts.enumerated().map { ($1.ref, $0) }), forKey: .insertIndex)
        try container.encode(updates, forKey: .updates)
        try container.encode(updateOrder, forKey: .updateOrder)
        try container.encode(deletes, forKey: .deletes)
        try container.encode(deleteOrder, forKey: .deleteOrder)
        try container.encode(bulk, forKey: .bulk)
        try container.encode(nextRef, forKey: .nextRef)
        try container.encode(bytes, forKey: .bytes)
    }

    public static func == (a: ChangeSet, b: ChangeSet) -> Bool {
        a.inserts == b.inserts && a.updates == b.updates && a.updateOrder == b.updateOrder && a.deletes == b.deletes
            && a.deleteOrder == b.deleteOrder && a.bulk == b.bulk && a.nextRef == b.nextRef && a.bytes == b.bytes
    }
}

/// The fields' tuples have no coding of their own: coded as `[column, value]` pairs, in order.
extension PendingInsert: Codable {
    private enum CodingKeys: String, CodingKey { case ref, entity, fields }
    private struct Field: Codable {
        var column: String
        var value: FieldValue
    }

    public init(from decoder: Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        ref = try container.decode(String.self, forKey: .ref)
        entity = try container.decode(String.self, forKey: .entity)
        fields = try container.decode([Field].self, forKey: .fields).map { ($0.column, $0.value) }
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(ref, forKey: .ref)
        try container.encode(entity, forKey: .entity)
        try container.encode(fields.map { Field(column: $0.column, value: $0.value) }, forKey: .fields)
    }
}
