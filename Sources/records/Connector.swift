import CLibEdit
import Foundation
import RecordsClient
import RecordsProtocol

struct ConnectError: Error, CustomStringConvertible { var description: String }

/// The shell's Ctrl-C while a command runs: once a command, `CANCEL s12 key` from a connection
/// of its own, as psql sends PostgreSQL's cancel request. Armed before each command.
final class InterruptCancel {
    var armed = false
    /// Whether a Ctrl-C came (left to be taken), asked of the file that catches it: the C
    /// shim's flag is `static`, one copy an object file in a debug build.
    var ctrlC: () -> Bool = { false }
    /// How this session's command is cancelled; nil from a server without CANCEL.
    var request: CancelRequest?
}

/// How this CLI reaches its server: the address, TLS, sign-in and reply format, done the same
/// at start and when the shell reconnects.
struct Connector {
    let options: CLIOptions
    /// Kept for signing in again after a reconnect (asked once).
    let password: String?
    /// FORMAT JSON after connecting (`Printer.asksForJSON`).
    let jsonReplies: Bool
    let interrupt = InterruptCancel()

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
        // Ctrl-C while waiting: the server is asked to stop the command.
        interrupt.request = CancelRequest(asking: connection, host: options.host, port: options.port, options: settings)
        connection.onInterrupted = { [interrupt] in
            guard interrupt.armed, interrupt.ctrlC(), let request = interrupt.request else { return }
            interrupt.armed = false
            request.send()
        }
        // json and csv: every reply that has a JSON form comes as JSON (DESCRIBE, INFO, CHANGES ...).
        if jsonReplies { _ = try connection.send("FORMAT JSON") }
        return connection
    }
}
