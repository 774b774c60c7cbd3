import Foundation
import RecordsProtocol

/// A model's stored properties as a line's `attribute=value` pairs: the same names reads decode
/// from (camelCase properties, snake_case attributes), each value as a literal the library
/// quotes itself (`Date`, `Data`, `UUID`, `Decimal`, arrays, nested `Codable` values as JSON
/// text). A nil optional is left out, as the synthesized `Encodable` leaves it out.
enum ModelEncoding {
    /// The pairs in the order the model encodes them.
    static func fields<T: Encodable>(_ model: T) throws -> [(name: String, literal: String)] {
        let encoder = FieldEncoder()
        do {
            try model.encode(to: encoder)
        } catch let error as RecordsError {
            throw error
        } catch {
            throw RecordsError.invalidRequest("\(T.self) could not be written as fields: \(error)")
        }
        if let refusal = encoder.fields.refusal { throw refusal }
        return encoder.fields.fields
    }

    /// `firstName` → `first_name`, `photoURL` → `photo_url` (JSONEncoder's convertToSnakeCase,
    /// the inverse of the reads' convertFromSnakeCase for names they produce).
    static func snakeCase(_ name: String) -> String {
        let characters = Array(name)
        var words: [String] = []
        var current = ""
        for (index, character) in characters.enumerated() {
            let next = index + 1 < characters.count ? characters[index + 1] : nil
            let previous = index > 0 ? characters[index - 1] : nil
            if character.isUppercase, !current.isEmpty,
               previous.map({ !$0.isUppercase }) ?? false || next.map({ $0.isLowercase }) ?? false {
                words.append(current)
                current = ""
            }
            current.append(character)
        }
        if !current.isEmpty { words.append(current) }
        return words.map { $0.lowercased() }.joined(separator: "_")
    }

    /// A value as an assignment writes it: an array as an array.
    static func assignment(_ value: any RecordsLiteral) throws(RecordsError) -> String {
        if let list = value as? any AssignableList { return try list.assignmentLiteral() }
        return try value.recordsLiteral()
    }

    /// The fields collected so far (shared by the encoder and its containers), and why the
    /// model cannot be written as fields, when a container that cannot throw found out.
    final class Fields {
        var fields: [(name: String, literal: String)] = []
        var refusal: RecordsError?
    }

    static let notFields = RecordsError.invalidRequest("a model is written as named fields (a struct with stored properties)")

    struct FieldEncoder: Encoder {
        var fields = Fields()
        var codingPath: [any CodingKey] = []
        var userInfo: [CodingUserInfoKey: Any] = [:]

        func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
            KeyedEncodingContainer(Container<Key>(fields: fields))
        }

        func unkeyedContainer() -> any UnkeyedEncodingContainer {
            FailingContainer(codingPath: codingPath)
        }

        func singleValueContainer() -> any SingleValueEncodingContainer {
            FailingContainer(codingPath: codingPath)
        }
    }

    struct Container<Key: CodingKey>: KeyedEncodingContainerProtocol {
        let fields: Fields
        var codingPath: [any CodingKey] = []

        mutating func encodeNil(forKey key: Key) throws { add(key, "nil") }

        mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws {
            if let literal = value as? any RecordsLiteral { return add(key, try ModelEncoding.assignment(literal)) }
            // A nested value (a json or jsonb attribute): its JSON text, quoted.
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            let text = String(decoding: try encoder.encode(value), as: UTF8.self)
            add(key, try text.recordsLiteral())
        }

        private func add(_ key: Key, _ literal: String) {
            fields.fields.append((ModelEncoding.snakeCase(key.stringValue), literal))
        }

        // A nested value written by hand is not a field: refused, never dropped.
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key) -> KeyedEncodingContainer<NestedKey> {
            fields.refusal = ModelEncoding.notFields
            return KeyedEncodingContainer(Container<NestedKey>(fields: Fields()))
        }

        mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
            FailingContainer(codingPath: codingPath + [key])
        }

        // A superclass's fields are the record's too.
        mutating func superEncoder() -> any Encoder { FieldEncoder(fields: fields) }
        mutating func superEncoder(forKey key: Key) -> any Encoder { FieldEncoder(fields: fields) }
    }

    /// A model that encodes itself as something other than named fields.
    struct FailingContainer: UnkeyedEncodingContainer, SingleValueEncodingContainer {
        var codingPath: [any CodingKey]
        var count: Int { 0 }
        mutating func encodeNil() throws { throw ModelEncoding.notFields }
        mutating func encode<T: Encodable>(_ value: T) throws { throw ModelEncoding.notFields }
        mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
            KeyedEncodingContainer(Container<NestedKey>(fields: Fields()))
        }
        mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { self }
        mutating func superEncoder() -> any Encoder { FieldEncoder() }
    }
}

/// An array attribute's value in an assignment: `["a", "b"]`, `[1, nil, 3]` (the `{...}` form
/// of `RecordsLiteral` is a list for IN and BETWEEN).
protocol AssignableList {
    func assignmentLiteral() throws(RecordsError) -> String
}

extension Array: AssignableList where Element: RecordsLiteral {
    func assignmentLiteral() throws(RecordsError) -> String {
        "[" + (try map { (value: Element) throws(RecordsError) -> String in try value.recordsLiteral() }).joined(separator: ", ") + "]"
    }
}
