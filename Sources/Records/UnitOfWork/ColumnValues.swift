/// A few columns' values by name: a pending insert's key (one column, two for a join table)
/// and the defaults filled for it. Found by walking, not hashing: a SAVE keeps one a row, and
/// a dictionary a row cost an allocation and a hash a lookup (a tenth of a 10,000-insert
/// SAVE's planning). Encoded as a JSON object, as the dictionary it replaces was, so a unit
/// handed to another build reads the same.
public struct ColumnValues: Sendable, Equatable, Codable, Sequence, ExpressibleByDictionaryLiteral {
    public typealias Element = (column: String, value: String)
    private var pairs: [Element] = []

    public init() {}

    /// A record's values as read, its nulls left out.
    public init(_ values: [String: String?]) {
        for (column, value) in values { self[column] = value }
    }

    public init(dictionaryLiteral elements: (String, String)...) {
        for (column, value) in elements { self[column] = value }
    }

    public subscript(column: String) -> String? {
        get {
            for pair in pairs where pair.column == column { return pair.value }
            return nil
        }
        set {
            if let index = pairs.firstIndex(where: { $0.column == column }) {
                if let newValue { pairs[index].value = newValue } else { pairs.remove(at: index) }
            } else if let newValue {
                pairs.append((column, newValue))
            }
        }
    }

    public var isEmpty: Bool { pairs.isEmpty }
    public var count: Int { pairs.count }

    /// `self` with `other`'s columns added; for a column both hold, `combine(mine, theirs)`.
    public func merging(_ other: ColumnValues, uniquingKeysWith combine: (String, String) -> String) -> ColumnValues {
        guard !isEmpty else { return other }
        var all = self
        for (column, value) in other { all[column] = all[column].map { combine($0, value) } ?? value }
        return all
    }

    public func makeIterator() -> IndexingIterator<[Element]> { pairs.makeIterator() }

    /// Equal when they hold the same columns with the same values, in whatever order.
    public static func == (a: ColumnValues, b: ColumnValues) -> Bool {
        a.count == b.count && a.pairs.allSatisfy { b[$0.column] == $0.value }
    }

    public init(from decoder: any Decoder) throws {
        for (column, value) in try [String: String](from: decoder).sorted(by: { $0.key < $1.key }) { self[column] = value }
    }

    public func encode(to encoder: any Encoder) throws {
        try Dictionary(pairs, uniquingKeysWith: { first, _ in first }).encode(to: encoder)
    }
}
