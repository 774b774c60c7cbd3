/// A statement's text and parameters, composed from parts: identifiers from the model (quoted),
/// values bound as `$n`. Nothing here edits SQL text after it is built.
struct SQLText {
    var text = ""
    var parameters: [String?] = []

    init(_ text: String = "", parameters: [String?] = []) {
        self.text = text
        self.parameters = parameters
    }

    /// Binds a value; returns its placeholder.
    mutating func bind(_ value: String?) -> String {
        parameters.append(value)
        return "$\(parameters.count)"
    }

    mutating func append(_ part: String) { text += part }

    var statement: Statement { Statement(text, parameters) }
}

extension Entity {
    /// `alias.k = ANY($n::type[])`, or for a composite key
    /// `(alias.k1, alias.k2) IN (SELECT * FROM unnest($n::t1[], $m::t2[]))`: the records of `keys`.
    func keyMatch(_ keys: [RecordKey], alias: String?, into sql: inout SQLText) -> String {
        let prefix = alias.map { $0 + "." } ?? ""
        if key.count == 1 {
            let list = sql.bind(SQL.arrayLiteral(keys.map { Optional($0.values[0]) }))
            return "\(prefix)\(SQL.identifier(key[0].name)) = ANY(\(list)::\(key[0].sqlType)[])"
        }
        let columns = key.enumerated().map { index, attribute in
            sql.bind(SQL.arrayLiteral(keys.map { Optional($0.values[index]) })) + "::\(attribute.sqlType)[]"
        }
        return "(" + key.map { prefix + SQL.identifier($0.name) }.joined(separator: ", ")
            + ") IN (SELECT * FROM unnest(" + columns.joined(separator: ", ") + "))"
    }

    /// `alias.k1::text, alias.k2::text`: the key as text columns, for reading keys back.
    func keyText(alias: String?) -> String {
        let prefix = alias.map { $0 + "." } ?? ""
        return key.map { prefix + SQL.identifier($0.name) + "::text" }.joined(separator: ", ")
    }

    /// `alias.k1, alias.k2`.
    func keyList(alias: String?) -> String {
        let prefix = alias.map { $0 + "." } ?? ""
        return key.map { prefix + SQL.identifier($0.name) }.joined(separator: ", ")
    }

    /// `k1 = $n AND k2 = $m`: one record.
    func keyEquals(_ key: RecordKey, alias: String?, into sql: inout SQLText) -> String {
        let prefix = alias.map { $0 + "." } ?? ""
        return zip(self.key, key.values).map { attribute, value in
            "\(prefix)\(SQL.identifier(attribute.name)) = \(sql.bind(value))::\(attribute.sqlType)"
        }.joined(separator: " AND ")
    }

    /// The key of a result row whose first `key.count` columns are `keyText`.
    func recordKey(_ row: [String?], from start: Int = 0) -> RecordKey {
        RecordKey(entity: name, values: (0..<key.count).map { row[start + $0] ?? "" })
    }
}
