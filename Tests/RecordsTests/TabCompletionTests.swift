import RecordsProtocol
import Testing

/// Completion by position, from a schema of our own (a shop: orders, customers, their address).
@Suite struct TabCompletionTests {
    let completion = TabCompletion(entities: ["orders", "customer", "address"])
    func shape(_ entity: String) -> TabCompletion.EntityShape? {
        switch entity {
        case "orders": .init(attributes: ["id", "placed_at", "total"], relationships: [("customer", "customer")])
        case "customer": .init(attributes: ["id", "last_name", "first_name"], relationships: [("address", "address"), ("orders", "orders")])
        case "address": .init(attributes: ["id", "city", "country"], relationships: [])
        default: nil
        }
    }
    func complete(_ before: String, _ word: String) -> [String] { completion.candidates(before: before, word: word, shape: shape) }

    @Test func verbsFirstThenEntitiesThenTheirNames() {
        #expect(complete("", "fi") == ["FIND"])
        #expect(complete("", "") .count == Verb.allCases.count)
        #expect(complete("FIND ", "c") == ["customer"])
        #expect(complete("DESCRIBE ", "") == ["address", "customer", "orders"])  // entities only, each once
        #expect(complete("FIND customer WHERE ", "la") == ["last_name"])
        #expect(complete("find customer where ", "fi") == ["first_name"])        // not the verb FIND
        #expect(complete("FIND customer ", "O") == ["OFFSET", "OR", "ORDER", "orders"])
        #expect(complete("HELP ", "SA") == ["SAVE"])
        #expect(complete("PING ", "") == [])
        #expect(complete("FIND nothing ", "") == [])
    }

    @Test func keyPathsFollowRelationships() {
        #expect(complete("FIND orders WHERE ", "customer.") == ["customer.@count", "customer.address", "customer.first_name", "customer.id",
                                                                 "customer.last_name", "customer.orders"])
        #expect(complete("FIND orders WHERE ", "customer.address.ci") == ["customer.address.city"])
        #expect(complete("FIND orders WHERE ", "nothing.") == [])
    }
}
