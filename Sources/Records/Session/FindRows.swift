import Postgres

/// What a FIND takes from each row it streams: the record's line into the batch and, where
/// asked, the page's last keys and the first rows' read versions. The FIND's worker has one,
/// and so has the worker reading the second half of a split read (`SplitRead`).
struct FindRows {
    // What each row reads is bound before the rows come: `let`s, which the row loop reads
    // without a check for exclusive access.
    private let encoder: RowEncoder
    private let cursorColumns: Int
    private let keyStart: Int
    private let limit: Int?
    private let tracksVersions: Bool
    private let select: QueryBuilder.Select
    private let entity: Entity
    private let view: ViewPlan.View
    /// The version of every row, and where its key is, when the snapshot stands for them.
    var stamped: (version: String, key: [Int])?
    private(set) var count = 0
    /// The extra row LIMIT n+1 fetched came: another page follows.
    private(set) var more = false
    /// The page's last row's sort keys, for the next page's cursor.
    private(set) var lastKeys: [String?] = []
    var versions: [(RecordKey, String)] = []
    // A row's fields are split out of its line only where more than the record is read.
    private var row = CopyRow()

    /// - Parameter select: the statement whose rows come, or one selecting the same columns
    ///   and more (the versions it adds are read when `stamped` is nil).
    init(_ select: QueryBuilder.Select, entity: Entity, view: ViewPlan.View, limit: Int?) {
        self.encoder = select.encoder
        self.cursorColumns = select.cursorColumns
        self.keyStart = select.encoder.count
        self.limit = limit
        self.tracksVersions = select.versionColumns != nil && view.tracksVersions
        self.select = select
        self.entity = entity
        self.view = view
    }

    /// Writes `line`'s record into `batch`; false when the rows asked for are all there.
    mutating func take(_ line: UnsafeRawBufferPointer, into batch: inout StreamBatch) -> Bool {
        if let limit, count == limit {
            more = true  // the extra row LIMIT n+1 fetched: another page follows
            return false
        }
        encoder.append(line: line, to: &batch)
        count += 1
        // Paged reads have a LIMIT: only the page's last row gives the next page's keys.
        let lastOfPage = cursorColumns > 0 && count == limit
        let versioned = versions.count < ReadVersions.limit && (stamped != nil || tracksVersions)
        guard lastOfPage || versioned else { return true }
        row.load(line)
        if lastOfPage { lastKeys = (0..<cursorColumns).map { row.string(keyStart + $0) } }
        if versioned {
            if let stamped {
                versions.append((entity.recordKey(stamped.key.map { row.string($0) }), stamped.version))
            } else if let version = Session.version(row, select: select, entity: entity, view: view) {
                versions.append(version)
            }
        }
        return true
    }

    /// Gives back the row's storage; once, when the rows are done.
    func deallocate() { row.deallocate() }
}
