import Foundation
import RecordsProtocol

// MARK: - Following a session to another server

/// How this client reached its server and signed in, to do it again after a server stopped
/// (queue-confined, as the connection).
struct Endpoint {
    var host: String
    var port: Int
    var options: LineConnection.Options
    var credentials: (user: String, password: String)?
}

extension RecordsClient {
    /// The token of the last `! handoff TOKEN ...` notice pushed on `connection`, what arrived
    /// unread included (a write that failed read nothing).
    static func handOffToken(_ connection: LineConnection) -> String? {
        _ = connection.closedByServer()
        return connection.handOffToken
    }

    /// On the queue: the connection broke after the server handed the session off. Connects
    /// again the same way (a balancer sends it to a live server), a few times over some
    /// seconds, signs in as before, and RESUMEs. The requests that got no reply never ran (a
    /// stopping server reads nothing after its handoff notice), so the caller sends them again.
    /// When no server took the session back in that time (none reachable, or PostgreSQL away)
    /// the token is kept: the session waits on the servers for `--resume-ttl`, so the next
    /// request tries again rather than finding the client closed.
    func resume(_ token: String) throws(RecordsError) {
        guard let endpoint else { throw .connection("closed") }
        connection?.close()
        connection = nil
        strandedToken = token
        var last = RecordsError.connection("the server stopped and handed this session off")
        for attempt in 0..<Self.resumeAttempts {
            if attempt > 0 { usleep(Self.resumeInterval) }
            let fresh: LineConnection
            do throws(RecordsError) {
                fresh = try LineConnection(host: endpoint.host, port: endpoint.port, options: endpoint.options)
            } catch {
                last = error
                continue
            }
            do throws(RecordsError) {
                if let (user, password) = endpoint.credentials {
                    try fresh.signIn(user: user, password: password).checked()
                }
                let resumed = try fresh.send("RESUME " + token)
                if resumed.code == .unavailable {
                    fresh.close()
                    last = .server(code: .unavailable, message: resumed.message, details: resumed.lines)
                    continue
                }
                strandedToken = nil
                try resumed.checked()  // spent, expired, another user's: no retry helps
                connection = fresh
                banner = fresh.banner
                // The session has another id here.
                cancelRequest = CancelRequest(asking: fresh, host: endpoint.host, port: endpoint.port, options: endpoint.options)
                resumeHandler?(resumed.message)
                return
            } catch .connection(let text) {
                fresh.close()
                last = .connection(text)
            } catch {
                fresh.close()
                throw error
            }
        }
        throw .connection("no server took this session back yet (\(last)); the next request tries again")
    }

    static let resumeAttempts = 40
    static let resumeInterval: useconds_t = 250_000
}
