import Testing
@testable import Records

/// The topology fold, without a database: failovers are counted by the primary's address.
@Suite struct TopologyTests {
    @Test func aPrimaryAtAnotherAddressIsAChange() {
        var topology = Topology()
        #expect(topology.summary == "primary: not seen yet")
        topology.observe(.init(primary: "10.0.0.1:5432", standbys: 1, synchronousStandbys: 1, lagBytes: 0))
        topology.observe(.init(primary: "10.0.0.1:5432", standbys: 1, synchronousStandbys: 1, lagBytes: 128))
        #expect(topology.primaryChanges == 0)
        #expect(topology.summary == "primary: 10.0.0.1:5432, 1 standby (1 synchronous), replay lag 128 bytes; primary changes seen: 0")
        // The standby was promoted; the old primary is not back yet.
        topology.observe(.init(primary: "10.0.0.2:5432", standbys: 0, synchronousStandbys: 0, lagBytes: nil))
        #expect(topology.primaryChanges == 1)
        #expect(topology.summary == "primary: 10.0.0.2:5432, no standby (a lone primary: a crash of it stops every write until it is back); primary changes seen: 1")
        topology.observe(.init(primary: "10.0.0.2:5432", standbys: 2, synchronousStandbys: 1, lagBytes: nil))
        #expect(topology.primaryChanges == 1)
        #expect(topology.summary == "primary: 10.0.0.2:5432, 2 standbys (1 synchronous); primary changes seen: 1")
    }
}
