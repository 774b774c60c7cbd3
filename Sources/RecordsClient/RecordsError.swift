import RecordsProtocol
/// What can go wrong talking to recordsd.
public enum RecordsError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The server answered `-ERR CODE message`, with detail lines before it (a SAVE's conflicts,
    /// validation problems).
    case server(code: ErrorCode, message: String, details: [String])
    /// No connection could be made (refused, unknown host, timed out).
    case unreachable(String)
    /// The connection broke, or its TLS failed.
    case connection(String)
    /// The server sent what the protocol does not allow.
    case protocolViolation(String)
    /// The caller's request cannot be put into a line (a format with a missing argument).
    case invalidRequest(String)
    /// SAVE found records another session changed since this one read them: each conflict
    /// with its three values (read, yours, now) where a field is in question.
    case conflict(message: String, conflicts: [Conflict])
    /// `SAVE KEY k` whose key a save of other changes already used, and committed: that save
    /// is done (`saved` is what it answered: its ids and counts) and nothing was saved now.
    /// Never a reason to save again under a new key: that would write the work twice.
    case alreadySaved(message: String, saved: SaveResult)

    public var description: String {
        switch self {
        case .server(let code, let message, let details):
            "\(code.rawValue): \(message)" + (details.isEmpty ? "" : "\n" + details.joined(separator: "\n"))
        case .unreachable(let text): text
        case .connection(let text): "connection: \(text)"
        case .protocolViolation(let text): "protocol: \(text)"
        case .invalidRequest(let text): "request: \(text)"
        case .conflict(let message, let conflicts):
            "CONFLICT: \(message)" + conflicts.map { "\n\($0.entity) \($0.key)" + ($0.field.map { " \($0)" } ?? "") + ": \($0.reason)" }.joined()
        case .alreadySaved(let message, _): "ALREADY_SAVED: \(message)"
        }
    }

    /// The protocol's error code (`.notFound`, `.conflict`, `.validation`, ...) of a server error.
    public var code: ErrorCode? {
        switch self {
        case .server(let code, _, _): code
        case .conflict: .conflict
        case .alreadySaved: .alreadySaved
        default: nil
        }
    }
}

/// A field's value as the server shows it in JSON: text, NULL, or a pending record.
public enum RecordsValue: Sendable, Equatable, Decodable {
    case text(String)
    case null
    /// A pending record's `#ref`.
    case ref(RecordRef)

    private struct Pending: Decodable { var ref: String }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let text = try? container.decode(String.self) {
            self = .text(text)
        } else {
            self = .ref(RecordRef(try container.decode(Pending.self).ref))
        }
    }
}

/// One record SAVE refused to write over (CONFLICT, under FORMAT JSON).
public struct Conflict: Sendable, Equatable, Decodable {
    public var entity: String
    /// The record's key as the server prints it.
    public var key: String
    /// `both changed` (a field both sides changed: `field`, `read`, `yours`, `now` are set),
    /// `deleted`, `other fields changed`, `changed before the update`, `changed before the delete`.
    public var reason: String
    public var field: String?
    /// The field when this session read it, the value this session set, and the value now.
    public var read: RecordsValue?
    public var yours: RecordsValue?
    public var now: RecordsValue?

    public init(entity: String, key: String, reason: String, field: String? = nil, read: RecordsValue? = nil, yours: RecordsValue? = nil, now: RecordsValue? = nil) {
        self.entity = entity
        self.key = key
        self.reason = reason
        self.field = field
        self.read = read
        self.yours = yours
        self.now = now
    }
}
