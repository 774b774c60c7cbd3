/// The key values known for each pending insert of a unit, by the insert's place in it
/// (`ChangeSet.inserts`). A SAVE's passes walk the unit in order and read a row's key by its
/// place; only a `#ref` (what a reference points at) goes through the unit's index. Kept by
/// `#ref`, the passes hashed every row's name about ten times: a tenth of a 10,000-insert
/// SAVE's planning.
struct PendingKeys: Sendable {
    let changes: ChangeSet
    private var byPlace: [AssignedKey?]

    /// Nothing known yet.
    init(_ changes: ChangeSet) {
        self.changes = changes
        byPlace = Array(repeating: nil, count: changes.inserts.count)
    }

    subscript(place: Int) -> AssignedKey? {
        get { byPlace[place] }
        set { byPlace[place] = newValue }
    }

    subscript(ref: String) -> AssignedKey? { changes.place(of: ref).flatMap { byPlace[$0] } }

    /// By `#ref`: what a unit keeps and a read shows.
    var byRef: [String: AssignedKey] {
        var keys: [String: AssignedKey] = Dictionary(minimumCapacity: byPlace.count)
        for (insert, key) in zip(changes.inserts, byPlace) { if let key { keys[insert.ref] = key } }
        return keys
    }

    /// `keys`' values added at their places, a new value over an old one of the same column.
    mutating func add(_ keys: [(place: Int, ref: String, key: AssignedKey)]) {
        for (place, _, key) in keys { byPlace[place] = byPlace[place].map { $0.updated(with: key) } ?? key }
    }

    /// With the defaults filled for writing added (the values a key has stay): the unit keeps
    /// the keys only.
    func filled(_ fills: [String: AssignedKey]) -> PendingKeys {
        var all = self
        for (ref, fill) in fills {
            guard let place = changes.place(of: ref) else { continue }
            all[place] = AssignedKey(entity: fill.entity, values: (all[place]?.values ?? [:]).merging(fill.values) { known, _ in known })
        }
        return all
    }
}
