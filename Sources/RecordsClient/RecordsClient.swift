import Dispatch
import Foundation

/// A connection to recordsd for programs: async requests, replies split and checked, records
/// decoded with `Codable`. One connection is one session with its own unit of work; requests
/// on it run one after another (`pipeline` sends several before reading their replies).
///
/// Blocking socket I/O runs on the client's own serial queue, never on Swift's cooperative
/// threads; everything the queue owns is touched only there.
public final class RecordsClient: @unchecked Sendable {  // `socket`, `reader`, `pushed` confined to `queue`
    let queue: DispatchQueue
    var socket: Socket? {
        didSet { shutdownLock.withLock { shutdownSocket = socket } }
    }
    /// The socket, for `shutdown` from another thread (a watch stream's end).
    private let shutdownLock = NSLock()
    private var shutdownSocket: Socket?
    var shutdownHandle: Socket? { shutdownLock.withLock { shutdownSocket } }
    var reader = ReplyReader()
    /// Events pushed on this connection (WATCH) while replies were read; see `takePushed`.
    var pushed: [String] = []
    /// The server's first line (`+OK recordsd 0.1.0 ready ...`).
    public private(set) var banner = ""

    private init(label: String) {
        queue = DispatchQueue(label: "RecordsClient " + label)
    }

    /// Connects to `records://[user[:password]@]host[:port]` (port 7878 by default) and signs in
    /// when the URL names a user.
    public static func connect(_ url: String) async throws -> RecordsClient {
        guard let components = URLComponents(string: url), components.scheme == "records", let host = components.host, !host.isEmpty else {
            throw RecordsError.invalidRequest("expected records://[user[:password]@]host[:port], not \(url)")
        }
        let client = try await connect(host: host, port: components.port ?? 7878)
        if let user = components.user {
            try await client.auth(user: user.removingPercentEncoding ?? user, password: components.password?.removingPercentEncoding ?? "")
        }
        return client
    }

    public static func connect(host: String, port: Int) async throws -> RecordsClient {
        let client = RecordsClient(label: "\(host):\(port)")
        try await client.onQueue { () throws(RecordsError) in
            let socket = try Socket(host: host, port: port)
            client.socket = socket
            let first = try client.readReplies(1)[0]
            client.banner = first.status
            _ = try first.checked()
        }
        return client
    }

    private func onQueue<T: Sendable>(_ work: @escaping @Sendable () throws(RecordsError) -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async {
                do throws(RecordsError) {
                    continuation.resume(returning: try work())
                } catch {
                    continuation.resume(throwing: error)
                }
            }
        }
    }

    // MARK: - Raw requests

    /// Sends one line and returns its reply as sent (an `-ERR` is not thrown).
    public func send(_ line: String) async throws -> WireReply {
        try await pipeline([line])[0]
    }

    /// Sends every line, then reads their replies: one round trip for all.
    public func pipeline(_ lines: [String]) async throws -> [WireReply] {
        for line in lines where line.contains("\n") || line.contains("\r") {
            throw RecordsError.invalidRequest("a request is one line: \(line.prefix(40))...")
        }
        return try await onQueue { [self] () throws(RecordsError) in
            guard let socket else { throw .connection("closed") }
            try socket.write(Array(lines.map { $0 + "\n" }.joined().utf8))
            return try readReplies(lines.count)
        }
    }

    /// Sends a line and its data lines (IMPORT), the data ended by `.`.
    func sendWithData(_ line: String, data: [String]) async throws -> WireReply {
        try await onQueue { [self] () throws(RecordsError) in
            guard let socket else { throw .connection("closed") }
            var text = line + "\n"
            for row in data { text += (row.hasPrefix(".") ? "." : "") + row + "\n" }
            try socket.write(Array((text + ".\n").utf8))
            return try readReplies(1)[0]
        }
    }

    /// Sends a request and throws its error, if it is one.
    @discardableResult
    public func request(_ line: String) async throws -> WireReply {
        try await send(line).checked()
    }

    /// Lines the server pushed on this connection so far (a WATCH on it), oldest first.
    public func takePushed() async throws -> [String] {
        try await onQueue { [self] () throws(RecordsError) in
            defer { pushed.removeAll() }
            return pushed
        }
    }

    /// On the queue.
    private func readReplies(_ count: Int) throws(RecordsError) -> [WireReply] {
        guard let socket else { throw .connection("closed") }
        var replies: [WireReply] = []
        while replies.count < count {
            let bytes = try socket.read()
            if bytes.isEmpty { throw .connection("the server closed the connection") }
            for event in try reader.feed(bytes) {
                switch event {
                case .reply(let reply): replies.append(reply)
                case .pushed(let line): pushed.append(line)
                }
            }
        }
        return replies
    }

    /// Ends the session (QUIT) and the connection. Pending changes are dropped by the server.
    public func close() async {
        _ = try? await onQueue { [self] () throws(RecordsError) in
            if let socket {
                try? socket.write(Array("QUIT\n".utf8))
                socket.close()
            }
            socket = nil
        }
    }

    // MARK: - Sign-in

    public func auth(user: String, password: String) async throws {
        // AUTH takes raw words; a quoted word is unescaped as a string.
        try await request("AUTH \(try user.recordsLiteral()) \(try password.recordsLiteral())")
    }
}

extension RecordsClient {
    /// Unblocks a read in progress on the queue (a watch stream ended): `shutdown` is safe from
    /// any thread, unlike close.
    func queueFreeShutdown() {
        shutdownHandle?.shutdownBoth()
    }
}
