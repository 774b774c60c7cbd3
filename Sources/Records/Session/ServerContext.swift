import Foundation
import Postgres

/// Limits that protect the server; each has a safe default and is configurable.
public struct Limits: Sendable {
    public var maxLineLength = 1 << 20
    public var maxPendingChanges = 1_000_000
    public init() {}
}

/// What every session shares: the model (swapped whole on reload), server facts for INFO.
public final class ServerContext: @unchecked Sendable {  // mutable state guarded by `lock`
    public static let version = "0.1.0"

    public let startedAt = Date()
    /// Where the data lives, with any password removed.
    public let databaseDescription: String
    public let limits: Limits
    private let lock = NSLock()
    private var currentModel: Model
    private var statusProvider: @Sendable () -> (sessions: Int, pool: ConnectionPool.Statistics?) = { (0, nil) }

    public init(model: Model, databaseDescription: String, limits: Limits = Limits()) {
        self.currentModel = model
        self.databaseDescription = databaseDescription
        self.limits = limits
    }

    /// The model a command runs against; a reload replaces it for later commands only.
    public var model: Model {
        get { lock.lock(); defer { lock.unlock() }; return currentModel }
        set { lock.lock(); currentModel = newValue; lock.unlock() }
    }

    public func setStatusProvider(_ provider: @escaping @Sendable () -> (sessions: Int, pool: ConnectionPool.Statistics?)) {
        lock.lock()
        statusProvider = provider
        lock.unlock()
    }

    var status: (sessions: Int, pool: ConnectionPool.Statistics?) {
        lock.lock()
        let provider = statusProvider
        lock.unlock()
        return provider()
    }
}
