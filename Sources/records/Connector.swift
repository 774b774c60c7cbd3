import CLibEdit
import Foundation
import RecordsClient
import RecordsProtocol

struct ConnectError: Error, CustomStringConvertible { var description: String }

/// How this CLI reaches its server: the address, TLS, sign-in and reply format, done the same
/// at start and when the shell reconnects.
struct Connector {
    let options: CLIOptions
    /// Kept for signing in again after a reconnect (asked once).
    let password: String?
    /// FORMAT JSON after connecting (`Printer.asksForJSON`).
    let jsonReplies: Bool

    func connect() throws -> LineConnection {
        var settings = LineConnection.Options(connectTimeout: options.connectTimeout)
        switch options.tls {
        case .off: settings.security = .plain
        case .startTLS: settings.security = .startTLS(caFile: options.tlsCA)
        case .direct: settings.security = .direct(caFile: options.tlsCA)
        }
        let connection: LineConnection
        do {
            connection = try LineConnection(host: options.host, port: options.port, options: settings)
        } catch {
            guard case .unreachable(let reason) = error else { throw error }
            throw ConnectError(description: reason + " — is recordsd running? start it with `scripts/serve` (or `recordsd`)")
        }
        if let user = options.user {
            let reply = try connection.signIn(user: user, password: password ?? "")
            guard reply.isOK else { throw ConnectError(description: "could not sign in as \(user): \(reply.statusText)") }
        }
        connection.beforeWaiting = { clibedit_flush_stdout() }
        // json and csv: every reply that has a JSON form comes as JSON (DESCRIBE, INFO, CHANGES ...).
        if jsonReplies { _ = try connection.send("FORMAT JSON") }
        return connection
    }
}
