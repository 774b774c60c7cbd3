import Foundation
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

/// A field's value in a conflict or a pending change, typed as a read types the field: text,
/// dates, uuids and binary (base64) as `.text`, integers, decimals and floats as numbers,
/// booleans, arrays, json values, NULL, or a pending record. `decode(_:)` turns it into the
/// type a model declares for the field (`Date`, `Data`, `Decimal`, ...), as reads decode.
public indirect enum RecordsValue: Sendable, Equatable, Decodable, CustomStringConvertible {
    case text(String)
    case integer(Int)
    /// A number that is not an integer (numeric, real, double precision), its digits kept.
    case decimal(Decimal)
    case bool(Bool)
    case array([RecordsValue])
    /// A json attribute's object.
    case object([String: RecordsValue])
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
        } else if let flag = try? container.decode(Bool.self) {
            self = .bool(flag)
        } else if let integer = try? container.decode(Int.self) {
            self = .integer(integer)
        } else if let number = try? container.decode(Decimal.self) {
            self = .decimal(number)
        } else if let items = try? container.decode([RecordsValue].self) {
            self = .array(items)
        } else if let pending = try? container.decode(Pending.self) {
            self = .ref(RecordRef(pending.ref))
        } else {
            self = .object(try container.decode([String: RecordsValue].self))
        }
    }

    /// As JSON (a pending record as `{"ref":"#e1"}`).
    public var description: String {
        switch self {
        case .text(let text): quotedString(text)
        case .integer(let value): String(value)
        case .decimal(let value): "\(value)"
        case .bool(let value): value ? "true" : "false"
        case .array(let items): "[" + items.map(\.description).joined(separator: ",") + "]"
        case .object(let fields): "{" + fields.sorted { $0.key < $1.key }.map { quotedString($0.key) + ":" + $0.value.description }.joined(separator: ",") + "}"
        case .null: "null"
        case .ref(let ref): "{\"ref\":\(quotedString(ref.description))}"
        }
    }

    /// The value as `T`, decoded as a record's field of that type is (`Int`, `Date` from its
    /// timestamp, `Data` from base64, an optional for NULL).
    public func decode<T: Decodable>(_ type: T.Type = T.self) throws -> T {
        try RecordDecoding.decode(T.self, description)
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
