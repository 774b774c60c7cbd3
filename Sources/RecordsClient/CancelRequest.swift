/// How a session's running command is stopped from another connection (`CANCEL s12 key`, as
/// PostgreSQL's cancel request): the key is asked of the session once it is connected
/// (`CANCEL KEY`), and the request goes on a connection of its own. RecordsClient sends it when
/// a Task is cancelled, the shell on Ctrl-C.
public struct CancelRequest: Sendable {
    let host: String
    let port: Int
    let options: LineConnection.Options
    let line: String

    /// Asks `connection`'s session for its key (reached at `host`:`port` with `options`); nil
    /// from a server that has no CANCEL.
    public init?(asking connection: LineConnection, host: String, port: Int, options: LineConnection.Options) {
        guard let reply = try? connection.send("CANCEL KEY"), reply.isOK else { return nil }
        let words = reply.message.split(separator: " ")
        guard words.count == 2, words[0].hasPrefix("s") else { return nil }
        (self.host, self.port, self.options) = (host, port, options)
        line = "CANCEL \(words[0]) \(words[1])"
    }

    /// Sends it and waits for the answer, which says nothing of the outcome. Best effort, as
    /// PostgreSQL's cancel is: the command may have ended first.
    public func send() {
        guard let connection = try? LineConnection(host: host, port: port, options: options) else { return }
        _ = try? connection.send(line)
        connection.close()
    }
}
