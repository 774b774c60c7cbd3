import Foundation

/// Text built once per shape and kept by the model (a reload starts empty), shared by the
/// workers: past `capacity` shapes (their columns are the clients' to choose) it starts over.
final class ShapeCache<Key: Hashable & Sendable, Value: Sendable>: @unchecked Sendable {  // `entries` guarded by `lock`
    private let lock = NSLock()
    private var entries: [Key: Value] = [:]
    let capacity: Int

    init(capacity: Int) {
        self.capacity = capacity
    }

    /// The value kept for `key`, else `make`'s, kept.
    func value<E: Error>(_ key: Key, _ make: () throws(E) -> Value) throws(E) -> Value {
        if let hit = lock.withLock({ entries[key] }) { return hit }
        let value = try make()
        lock.withLock {
            if entries.count >= capacity { entries.removeAll() }
            entries[key] = value
        }
        return value
    }
}
