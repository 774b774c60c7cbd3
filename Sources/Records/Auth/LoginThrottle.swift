import Foundation

/// Slows password guessing, per user and address. An attempt is counted before its password
/// is checked, so guesses sent in parallel count like guesses sent one after another; after
/// `lockAfter` failures in a row that user is locked out from that address for `lockSeconds`.
/// A failed attempt's reply is delayed (doubling with each failure) instead of the next attempt
/// being refused, so one typo costs half a second, not a refusal. A user is never locked out
/// from another address, and failures from one address never lock out other users (behind a
/// proxy, every user shares one address).
public final class LoginThrottle: @unchecked Sendable {  // state guarded by `lock`
    public struct Policy: Sendable {
        /// The delay of the first failed attempt's reply; doubles with each one after.
        public var baseDelay: Double = 0.5
        /// The longest a failed reply is delayed.
        public var maxDelay: Double = 8
        /// Failures in a row after which the pair is locked for `lockSeconds`.
        public var lockAfter = 5
        public var lockSeconds: Double = 300
        public init() {}
    }

    public enum Admission: Equatable, Sendable {
        /// Check the password; the attempt is already counted.
        case allowed
        /// Locked: try again in `wait` seconds. `first`: the first refusal of this lock (logged).
        case refused(wait: Double, first: Bool)
    }

    private struct Record {
        var failures = 0
        var lockedUntil: Double = 0
        var refusalLogged = false
    }

    public let policy: Policy
    private let lock = NSLock()
    private var pairs: [String: Record] = [:]

    public init(policy: Policy = Policy()) { self.policy = policy }

    private func key(_ user: String, _ address: String) -> String { address + "\u{0}" + user }

    /// Admits an attempt of `user` from `address`, counting it as a failure until it succeeds.
    public func begin(user: String, address: String, now: Double = Date().timeIntervalSince1970) -> Admission {
        lock.lock()
        defer { lock.unlock() }
        if pairs.count > 100_000 { prune(now) }
        var record = pairs[key(user, address)] ?? Record()
        if record.lockedUntil > now {
            let first = !record.refusalLogged
            record.refusalLogged = true
            pairs[key(user, address)] = record
            return .refused(wait: record.lockedUntil - now, first: first)
        }
        if record.lockedUntil > 0 {
            // A lock that ran out: a fresh start.
            record = Record()
        }
        record.failures += 1
        if record.failures >= policy.lockAfter {
            record.lockedUntil = now + policy.lockSeconds
            record.refusalLogged = false
        }
        pairs[key(user, address)] = record
        return .allowed
    }

    /// The password was wrong: how long its reply waits.
    public func failed(user: String, address: String) -> Double {
        lock.lock()
        defer { lock.unlock() }
        let failures = pairs[key(user, address)]?.failures ?? 1
        return min(policy.maxDelay, policy.baseDelay * pow(2, Double(max(0, failures - 1))))
    }

    public func succeeded(user: String, address: String) {
        lock.lock()
        pairs[key(user, address)] = nil
        lock.unlock()
    }

    private func prune(_ now: Double) {
        pairs = pairs.filter { $0.value.lockedUntil > now || $0.value.failures > 0 && $0.value.lockedUntil == 0 }
        if pairs.count > 100_000 { pairs = pairs.filter { $0.value.lockedUntil > now } }
    }
}
