@testable import Records
import Testing

/// A FIND's snapshot standing for its records' versions (`SnapshotVersion`), and how a record's
/// current xmin is judged against it.
@Suite struct SnapshotVersionTests {
    @Test func onlyASnapshotWithNothingInProgressStandsForVersions() {
        #expect(SnapshotVersion.stamp("748:748:") == "@748:748:")
        #expect(SnapshotVersion.stamp("745:748:745") == nil)
        #expect(SnapshotVersion.stamp("745:748:") == nil)
        for bad in ["", "748:748", "x:748:", "748:748:1:2", "-1:-1:"] { #expect(SnapshotVersion.stamp(bad) == nil, "\(bad)") }
        #expect(SnapshotVersion(version: "@748:748:") == SnapshotVersion(snapshot: "748:748:"))
        #expect(SnapshotVersion(version: "748") == nil)
    }

    @Test func aVersionWrittenBeforeTheSnapshotIsTheOneItSaw() {
        let read = SnapshotVersion(snapshot: "1000:1000:")!
        #expect(read.saw(xid: 999, horizon: 1200))
        #expect(read.saw(xid: 3, horizon: 1200))
        #expect(!read.saw(xid: 1000, horizon: 1200))
        #expect(!read.saw(xid: 1199, horizon: 1200))
        // PostgreSQL's own ids (bootstrap 1, frozen 2) are older than anything.
        #expect(read.saw(xid: 1, horizon: 1200))
        #expect(read.saw(xid: 2, horizon: 1200))
        // A low id above the horizon's low bits is from before the first wraparound... which a
        // cluster this young has not had: it is old.
        #expect(read.saw(xid: 4_000_000_000, horizon: 1200))
    }

    @Test func idsAreDatedAcrossWraparound() {
        let epoch: UInt64 = 1 << 32
        // Read in epoch 1 at xid 100; the row's id 4,294,967,000 is epoch 0's: before the read.
        let read = SnapshotVersion(snapshot: Substring("\(epoch + 100):\(epoch + 100):"))!
        #expect(read.saw(xid: 4_294_967_000, horizon: epoch + 500))
        #expect(read.saw(xid: 99, horizon: epoch + 500))
        #expect(!read.saw(xid: 100, horizon: epoch + 500))
        #expect(!read.saw(xid: 499, horizon: epoch + 500))
        // Read at the end of epoch 0, the row rewritten just after the wrap.
        let late = SnapshotVersion(snapshot: Substring("\(epoch - 10):\(epoch - 10):"))!
        #expect(!late.saw(xid: 5, horizon: epoch + 20))
        #expect(!late.saw(xid: UInt32(truncatingIfNeeded: epoch - 10), horizon: epoch + 20))
        #expect(late.saw(xid: UInt32(truncatingIfNeeded: epoch - 11), horizon: epoch + 20))
    }

    @Test func resolvingGivesTheCurrentVersionOrAChange() {
        #expect(ReadVersions.resolve(nil, current: "900", horizon: "1200") == nil)
        #expect(ReadVersions.resolve("850", current: "900", horizon: "1200") == "850")
        #expect(ReadVersions.resolve("@1000:1000:", current: "900", horizon: "1200") == "900")
        #expect(ReadVersions.resolve("@1000:1000:", current: "1100", horizon: "1200") == "@1000:1000:")
        // Without a horizon nothing can be dated: a change, never a lost one.
        #expect(ReadVersions.resolve("@1000:1000:", current: "900", horizon: nil) == "@1000:1000:")
        #expect(ReadVersions.resolve("@1000:1000:", current: "x", horizon: "1200") == "@1000:1000:")
    }
}
