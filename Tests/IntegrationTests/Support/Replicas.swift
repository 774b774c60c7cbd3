#if canImport(Glibc)
import Glibc
#endif
import Foundation
import RecordsClient

/// Two `recordsd` on one database, as replicas behind a balancer are: a client's server is
/// stopped (SIGTERM hands its sessions off), started again, and the client goes on on the other.
final class Replicas {
    let databaseURL: String
    /// The arguments both are started with (a schema's migrations included).
    let arguments: [String]
    private(set) var servers: [TestServer]

    init(schema: Schema? = nil, arguments: [String] = []) throws {
        self.arguments = (schema.map { ["--migrations", $0.directory] } ?? []) + arguments
        let first = try TestServer(arguments: self.arguments)
        databaseURL = first.databaseURL
        servers = [first, try TestServer(databaseURL: databaseURL, arguments: self.arguments)]
    }

    /// What a client was told when its server stopped.
    struct Farewell {
        var pushed: [String]
        /// The token of the `! handoff TOKEN ...` notice; nil when none came.
        var token: String? {
            pushed.first { $0.hasPrefix("! handoff ") }.map { String($0.split(separator: " ")[2]) }
        }
    }

    /// Stops server `index` with SIGTERM while `clients` are connected to it, reads what each
    /// was told up to the close, and starts the server again on a new port.
    func restart(_ index: Int, reading clients: [LineClient] = []) throws -> [Farewell] {
        kill(servers[index].process.processIdentifier, SIGTERM)
        let farewells = try clients.map { Farewell(pushed: try $0.readToEnd()) }
        servers[index].process.waitUntilExit()
        servers[index] = try TestServer(databaseURL: databaseURL, arguments: arguments)
        return farewells
    }

    /// Moves `client`, on server `from`, to the other server: stops and restarts `from`, then
    /// connects to the other and, when a token came, sends `before` (an AUTH) and RESUME.
    /// Returns the new client, the RESUME's reply and what the old connection was told.
    func move(_ client: LineClient, from: Int, before: [String] = []) throws -> (client: LineClient, resumed: WireReply?, farewell: Farewell) {
        let farewell = try restart(from, reading: [client])[0]
        let moved = try servers[1 - from].client()
        for line in before { try moved.ok(line) }
        let resumed = try farewell.token.map { try moved.send("RESUME " + $0) }
        return (moved, resumed, farewell)
    }
}
