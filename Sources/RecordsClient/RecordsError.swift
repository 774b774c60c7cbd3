/// What can go wrong talking to recordsd.
public enum RecordsError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The server answered `-ERR CODE message`, with detail lines before it (a SAVE's conflicts,
    /// validation problems).
    case server(code: String, message: String, details: [String])
    /// No connection could be made (refused, unknown host, timed out).
    case unreachable(String)
    /// The connection broke, or its TLS failed.
    case connection(String)
    /// The server sent what the protocol does not allow.
    case protocolViolation(String)
    /// The caller's request cannot be put into a line (a format with a missing argument).
    case invalidRequest(String)

    public var description: String {
        switch self {
        case .server(let code, let message, let details):
            "\(code): \(message)" + (details.isEmpty ? "" : "\n" + details.joined(separator: "\n"))
        case .unreachable(let text): text
        case .connection(let text): "connection: \(text)"
        case .protocolViolation(let text): "protocol: \(text)"
        case .invalidRequest(let text): "request: \(text)"
        }
    }

    /// The protocol's error code (`NOT_FOUND`, `CONFLICT`, `VALIDATION`, ...) of a server error.
    public var code: String? {
        if case .server(let code, _, _) = self { return code }
        return nil
    }
}
