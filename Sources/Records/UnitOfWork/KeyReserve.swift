import Foundation
import Postgres

/// Sequence values taken ahead of the SAVEs that need them, shared by the server's workers: a
/// SAVE whose missing keys all come from sequences learns them here, without asking PostgreSQL
/// inside its transaction, and so writes in one round trip. Like a sequence's own `CACHE`, a
/// stopping server leaves the values it held unused (gaps), and keys follow the order they
/// were handed out, not the order of commits. Values are kept per database role: a role that
/// may not use a sequence still cannot get its values.
public final class KeyReserve: @unchecked Sendable {
    /// Values fetched beyond what a SAVE needs, per sequence and role.
    public static let ahead = 32

    private struct Slot: Hashable {
        var role: String
        var sequence: String
    }

    /// A slot's values, handed out from `next` on: taking one moves the cursor, not the rest.
    private struct Held {
        var values: [String] = []
        var next = 0

        mutating func take(_ count: Int) -> [String] {
            let end = min(next + count, values.count)
            let given = Array(values[next..<end])
            next = end
            if next == values.count { values.removeAll(keepingCapacity: true); next = 0 }
            return given
        }

        mutating func add<S: Sequence>(_ more: S) where S.Element == String {
            if next > 0 { values.removeFirst(next); next = 0 }
            values.append(contentsOf: more)
        }
    }

    private let lock = NSLock()
    private var held: [Slot: Held] = [:]
    /// How many drops there have been: values fetched across one may be keys a client gave
    /// meanwhile (drops are rare: a sequence moved, a reload), so they are not kept.
    private var drops = 0

    public init() {}

    /// `count` values of each sequence, in the order handed out; what the reserve lacks is
    /// fetched on `connection` (outside any transaction: `nextval` is never rolled back), with
    /// `ahead` more for the SAVEs after this one. `meanwhile` runs once, while PostgreSQL
    /// works (or at once, when the reserve holds every value).
    func take(_ needs: [(sequence: String, count: Int)], role: String, on connection: Connection,
              meanwhile: () -> Void = {}) throws -> [String: [String]] {
        var taken: [String: [String]] = [:]
        var missing: [(sequence: String, count: Int)] = []
        var dropsBefore = 0
        lock.withLock {
            dropsBefore = drops
            for need in needs {
                let given = held[Slot(role: role, sequence: need.sequence), default: Held()].take(need.count)
                taken[need.sequence] = given
                if given.count < need.count { missing.append((need.sequence, need.count - given.count)) }
            }
        }
        guard !missing.isEmpty else {
            meanwhile()
            return taken
        }
        // Values ahead only from an ascending sequence far from its end: near it (a small
        // MAXVALUE), or descending, exactly what is needed, as a plain INSERT would take.
        let results = try connection.pipeline(missing.map { need in
            ("""
             SELECT nextval($1::regclass)::text FROM generate_series(1, $2::int + coalesce((
                 SELECT $3::int FROM pg_sequence s WHERE s.seqrelid = $1::regclass AND s.seqincrement > 0 AND NOT s.seqcycle
                 AND s.seqmax - coalesce(pg_sequence_last_value($1::regclass), s.seqstart) > ($2::bigint + $3::bigint + 1) * s.seqincrement), 0))
             """, [need.sequence, String(need.count), String(Self.ahead)])
        }, meanwhile: meanwhile)
        var surplus: [(Slot, ArraySlice<String>)] = []
        for (need, result) in zip(missing, results) {
            let values = (0..<result.rowCount).compactMap { result.string($0, 0) }
            taken[need.sequence, default: []] += values.prefix(need.count)
            surplus.append((Slot(role: role, sequence: need.sequence), values.dropFirst(need.count)))
        }
        lock.withLock {
            // A sequence moved (or the model reloaded) while the values were fetched: the
            // surplus may hold keys given meanwhile, so it is left unused, a gap.
            guard drops == dropsBefore else { return }
            for (slot, values) in surplus { held[slot, default: Held()].add(values) }
        }
        return taken
    }

    /// Forgets the values held for `sequence` (it was moved: some may be taken already).
    func drop(_ sequence: String) {
        lock.withLock {
            held = held.filter { $0.key.sequence != sequence }
            drops += 1
        }
    }

    /// Forgets every value held: the model was reloaded (a sequence dropped and made again
    /// under the same name is another sequence; a revoked right takes effect).
    public func dropAll() {
        lock.withLock {
            held.removeAll()
            drops += 1
        }
    }
}
