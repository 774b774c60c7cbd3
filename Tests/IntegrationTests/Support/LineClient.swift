import Foundation
import RecordsClient

extension WireReply {
    var ok: Bool { isOK }
}

/// The tests' client: RecordsClient's `LineConnection` (the one client of the protocol in the
/// repo), with a receive timeout so a test cannot hang, and test failures for broken streams.
final class LineClient {
    let connection: LineConnection
    /// Keeps the server this client talks to alive as long as the client.
    var owner: AnyObject?
    var banner: String { connection.banner }
    /// Pushed lines seen while reading replies, as sent (`! ...`).
    var pushed: [String] { connection.pushed.map { "! " + $0 } }

    /// - Parameters:
    ///   - source: a loopback address to connect from (127.0.0.2 ...), to be another client host.
    ///   - directTLS: TLS from the first byte (a `--tls-listen` port), trusting this CA file.
    init(port: Int, host: String = "127.0.0.1", source: String? = nil, timeout: Int = 20, readBanner: Bool = true,
         directTLS ca: String? = nil, serverName: String = "localhost") throws {
        let options = LineConnection.Options(security: ca.map { .direct(caFile: $0) } ?? .plain, serverName: serverName,
                                             receiveTimeout: Double(timeout), source: source, readBanner: readBanner)
        do {
            connection = try LineConnection(host: host, port: port, options: options)
        } catch {
            throw TestFailure("connect to \(host):\(port): \(error)")
        }
    }

    /// STARTTLS, then the handshake; `behind` is sent in clear in the same write as STARTTLS
    /// (what a man in the middle would inject).
    func startTLS(ca: String, serverName: String = "localhost", behind: String = "") throws {
        try connection.startTLS(caFile: ca, serverName: serverName, behind: behind)
    }

    func write(_ text: String) throws { try connection.write(text) }

    func writeBytes(_ bytes: [UInt8]) throws { try connection.write(bytes: bytes) }

    /// The next line as sent, nil at end of stream.
    func readLine() throws -> String? { try connection.readLine() }

    /// Reads one whole reply; pushed lines are set aside in `pushed`.
    func readReply() throws -> WireReply { try connection.readReply() }

    /// Sends one line and reads its reply.
    @discardableResult
    func send(_ line: String) throws -> WireReply { try connection.send(line) }

    /// Sends, and requires `+OK`.
    @discardableResult
    func ok(_ line: String, sourceLocation: String = #function) throws -> WireReply {
        let reply = try send(line)
        guard reply.ok else { throw TestFailure("\(line) -> \(reply)") }
        return reply
    }

    /// Reads until the server closes; returns the rest.
    func readToEnd() throws -> [String] {
        var lines: [String] = []
        while let line = try readLine() { lines.append(line) }
        return lines
    }

    /// Breaks the connection under whoever reads it (a client that vanishes).
    func shutdown() { connection.shutdownBoth() }
}
