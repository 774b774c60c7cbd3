import Foundation

/// Slows password guessing, per user and address. Attempts being checked count against the
/// failures still allowed, so guesses sent in parallel are checked no more than guesses sent
/// one after another (the rest are told to wait for the answers); after `lockAfter` failures
/// in a row that user is locked out from that address for `lockSeconds`. Only failures lock:
/// right passwords sent in parallel (a program opening connections) never do.
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
        /// As many attempts are being checked as failures remain before the lock: wait for
        /// their answers, then try again. Nothing is counted.
        case busy
    }

    private struct Record {
        var failures = 0
        var checking = 0
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
        guard record.failures + record.checking < policy.lockAfter else { return .busy }
        record.checking += 1
        pairs[key(user, address)] = record
        return .allowed
    }

    /// The password was wrong: how long its reply waits.
    public func failed(user: String, address: String, now: Double = Date().timeIntervalSince1970) -> Double {
        lock.lock()
        defer { lock.unlock() }
        var record = pairs[key(user, address)] ?? Record()
        record.checking = max(0, record.checking - 1)
        record.failures += 1
        if record.failures >= policy.lockAfter && record.lockedUntil <= now {
            record.lockedUntil = now + policy.lockSeconds
            record.refusalLogged = false
        }
        pairs[key(user, address)] = record
        return min(policy.maxDelay, policy.baseDelay * pow(2, Double(max(0, record.failures - 1))))
    }

    /// The password was right: failures are forgotten (attempts still being checked count on).
    public func succeeded(user: String, address: String) {
        lock.lock()
        defer { lock.unlock() }
        let checking = max(0, (pairs[key(user, address)]?.checking ?? 1) - 1)
        pairs[key(user, address)] = checking > 0 ? Record(checking: checking) : nil
    }

    private func prune(_ now: Double) {
        pairs = pairs.filter { $0.value.lockedUntil > now || ($0.value.failures > 0 || $0.value.checking > 0) && $0.value.lockedUntil == 0 }
        if pairs.count > 100_000 { pairs = pairs.filter { $0.value.lockedUntil > now } }
    }
}
