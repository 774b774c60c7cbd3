import Foundation
import Testing
@testable import RecordsClient

/// Models written as fields, without a server: the names reads decode from, the literals the
/// protocol takes.
@Suite struct ModelEncodingTests {
    struct Place: Codable, Sendable { var lat: Double; var tags: [String] }

    struct Gadget: RecordsEntity, Encodable {
        static let entityName = "gadget"
        var id: Int?
        var displayName: String
        var photoURL: String?
        var serial: UUID
        var price: Decimal
        var photo: Data
        var madeAt: Date
        var tags: [String]
        var sizes: [Int?]
        var place: Place
        var inStock: Bool
        var note: String?
    }

    @Test func namesAreTheSnakeCaseReadsDecodeFrom() {
        #expect(ModelEncoding.snakeCase("firstName") == "first_name")
        #expect(ModelEncoding.snakeCase("photoURL") == "photo_url")
        #expect(ModelEncoding.snakeCase("urlString") == "url_string")
        #expect(ModelEncoding.snakeCase("URLString") == "url_string")
        #expect(ModelEncoding.snakeCase("id") == "id")
        #expect(ModelEncoding.snakeCase("already_snake") == "already_snake")
        #expect(ModelEncoding.snakeCase("line2Total") == "line2_total")
    }

    @Test func everyValueIsALiteralTheLibraryQuotes() throws {
        let gadget = Gadget(id: nil, displayName: "Lamp \"A\"", photoURL: nil, serial: UUID(uuidString: "3DE2B81B-A3F1-4C1A-9D2E-0B1C2D3E4F5A")!,
                            price: Decimal(string: "12.30")!, photo: Data([0, 255, 7]), madeAt: Date(timeIntervalSince1970: 1_700_000_000.25),
                            tags: ["a", "b c"], sizes: [1, nil, 3], place: Place(lat: 1.5, tags: ["x"]), inStock: true, note: nil)
        let fields = try ModelEncoding.fields(gadget)
        #expect(fields.map(\.name) == ["display_name", "serial", "price", "photo", "made_at", "tags", "sizes", "place", "in_stock"])
        #expect(fields.map(\.literal) == [#""Lamp \"A\"""#, #""3de2b81b-a3f1-4c1a-9d2e-0b1c2d3e4f5a""#, "12.3", #""AP8H""#,
                                          #""2023-11-14T22:13:20.250000Z""#, #"["a", "b c"]"#, "[1, nil, 3]",
                                          #""{\"lat\":1.5,\"tags\":[\"x\"]}""#, "true"])
    }

    /// A model whose own encode(to:) nests a value by hand: refused, never written without it.
    struct HandWritten: Encodable {
        enum Keys: String, CodingKey { case name, address }
        enum AddressKeys: String, CodingKey { case city }
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: Keys.self)
            try container.encode("Ann", forKey: .name)
            var address = container.nestedContainer(keyedBy: AddressKeys.self, forKey: .address)
            try address.encode("Oslo", forKey: .city)
        }
    }

    @Test func aHandNestedValueIsRefusedNotDropped() {
        #expect(throws: ModelEncoding.notFields) { try ModelEncoding.fields(HandWritten()) }
    }

    @Test func anArrayInAnAssignmentIsAnArrayNotAnInList() throws {
        #expect(try RecordsClient.assignments(["tags": ["a", "b"], "ids": [1, 2]]) == #" tags=["a", "b"] ids=[1, 2]"#)
        #expect(try ["a", "b"].recordsLiteral() == #"{"a", "b"}"#)  // in a predicate: IN {a, b}
    }
}
