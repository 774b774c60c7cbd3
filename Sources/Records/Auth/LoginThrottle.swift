import Foundation

/// Slows password guessing: each failed AUTH for a user from an address doubles the wait
/// before the next attempt from there, and enough failures lock that pair for a while. An
/// address failing across many names is throttled as a whole. A user is never locked out
/// from another address, so an attacker cannot lock a user out.
public final class LoginThrottle: @unchecked Sendable {  // state guarded by `lock`
    public struct Policy: Sendable {
        /// The wait after the first failure; doubles with each one after.
        public var baseDelay: Double = 0.5
        /// Failures after which the pair is locked for `lockSeconds`.
        public var lockAfter = 5
        public var lockSeconds: Double = 300
        public init() {}
    }

    private struct Record {
        var failures = 0
        var nextAllowed: Double = 0

        /// `quiet`: failures tolerated before any wait (an address's several users mistyping).
        mutating func punish(_ now: Double, policy: Policy, lockAfter: Int, quiet: Int = 0) {
            failures += 1
            guard failures > quiet else { return }
            let wait = failures >= lockAfter ? policy.lockSeconds : min(policy.lockSeconds, policy.baseDelay * pow(2, Double(failures - quiet - 1)))
            nextAllowed = now + wait
        }
    }

    public let policy: Policy
    private let lock = NSLock()
    private var pairs: [String: Record] = [:]
    private var addresses: [String: Record] = [:]

    public init(policy: Policy = Policy()) { self.policy = policy }

    /// Seconds to wait before `user` may try again from `address`; 0 when allowed now.
    public func wait(user: String, address: String, now: Double = Date().timeIntervalSince1970) -> Double {
        lock.lock()
        defer { lock.unlock() }
        let pair = pairs[address + "\u{0}" + user]?.nextAllowed ?? 0
        let whole = addresses[address]?.nextAllowed ?? 0
        return max(0, max(pair, whole) - now)
    }

    public func failed(user: String, address: String, now: Double = Date().timeIntervalSince1970) {
        lock.lock()
        defer { lock.unlock() }
        if pairs.count > 100_000 { prune(now) }
        pairs[address + "\u{0}" + user, default: Record()].punish(now, policy: policy, lockAfter: policy.lockAfter)
        addresses[address, default: Record()].punish(now, policy: policy, lockAfter: policy.lockAfter * 4, quiet: 3)
    }

    public func succeeded(user: String, address: String) {
        lock.lock()
        pairs[address + "\u{0}" + user] = nil
        lock.unlock()
    }

    private func prune(_ now: Double) {
        pairs = pairs.filter { $0.value.nextAllowed > now - policy.lockSeconds }
        addresses = addresses.filter { $0.value.nextAllowed > now - policy.lockSeconds }
    }
}

