import Foundation

/// A type records decode into: its entity's name and `Decodable` fields named as the columns
/// (`first_name` becomes `firstName`; to-one relationships are the target's id).
public protocol RecordsEntity: Decodable, Sendable {
    static var entityName: String { get }
    /// The property holding the record's key, by which `update(_:)` and `delete(_:)` name a
    /// stored record; `id` unless the type says otherwise.
    static var keyAttribute: String { get }
    /// The properties of a composite key (`["team", "person"]`), by which model writes name a
    /// stored record; `[keyAttribute]` unless the type says otherwise.
    static var keyAttributes: [String] { get }
}

extension RecordsEntity {
    public static var keyAttribute: String { "id" }
    public static var keyAttributes: [String] { [keyAttribute] }
}

enum RecordDecoding {
    /// snake_case columns to camelCase properties, PostgreSQL's timestamps, base64 binary.
    static func decoder() -> JSONDecoder {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        decoder.dataDecodingStrategy = .base64
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = parseTimestamp(text) else {
                throw DecodingError.dataCorruptedError(in: container, debugDescription: "not a timestamp: \(text)")
            }
            return date
        }
        return decoder
    }

    /// One decoder for every call: made once (its set-up costs more than a small record's
    /// decoding), never changed after, and JSONDecoder's decode keeps its state per call.
    private final class Shared: @unchecked Sendable {  // `decoder` configured once in init, then only read
        let decoder = RecordDecoding.decoder()
    }
    private static let shared = Shared()

    static func decode<T: Decodable>(_ type: T.Type, _ line: String) throws -> T {
        do {
            return try shared.decoder.decode(T.self, from: Data(line.utf8))
        } catch {
            throw RecordsError.protocolViolation("a \(T.self) could not be decoded from \(line.prefix(200)): \(error)")
        }
    }

    /// `2024-06-01T12:00:00+00:00`, `2026-11-30T14:41:43.771604+00:00`, a date `2024-06-01`.
    static func parseTimestamp(_ text: String) -> Date? {
        let formatter = ISO8601DateFormatter()
        var base = text
        var fraction = 0.0
        if let dot = text.firstIndex(of: ".") {
            let digits = text[text.index(after: dot)...].prefix { $0.isNumber }
            fraction = Double("0." + digits) ?? 0
            base = String(text[..<dot]) + String(text[text.index(after: dot)...].dropFirst(digits.count))
        }
        if base.count == 10 {
            formatter.formatOptions = [.withFullDate]
        } else if base.count == 19 {
            // A timestamp without time zone (`2024-05-31T14:30:00`): read as UTC.
            base += "Z"
        }
        return formatter.date(from: base).map { $0.addingTimeInterval(fraction) }
    }
}

/// A json or jsonb column's value, as it came.
public indirect enum RecordsJSON: Codable, Sendable, Equatable {
    case string(String), number(Double), bool(Bool), null
    case array([RecordsJSON])
    case object([String: RecordsJSON])

    public init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .null }
        else if let value = try? container.decode(Bool.self) { self = .bool(value) }
        else if let value = try? container.decode(Double.self) { self = .number(value) }
        else if let value = try? container.decode(String.self) { self = .string(value) }
        else if let value = try? container.decode([RecordsJSON].self) { self = .array(value) }
        else { self = .object(try container.decode([String: RecordsJSON].self)) }
    }

    public func encode(to encoder: Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let value): try container.encode(value)
        case .number(let value): try container.encode(value)
        case .bool(let value): try container.encode(value)
        case .null: try container.encodeNil()
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }
}

extension WireReply {
    /// The reply's data lines decoded as records (a FIND's or GET's, sent with `send` or `pipeline`).
    public func records<T: Decodable>(_ type: T.Type) throws -> [T] {
        try checked().lines.map { try RecordDecoding.decode(T.self, $0) }
    }
}
