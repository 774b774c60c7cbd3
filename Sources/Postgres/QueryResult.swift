import CLibPQ

/// The sole owner of one `PGresult`; `PQclear` happens in `deinit` and nowhere else.
public final class QueryResult {
    private let handle: OpaquePointer

    init(owning handle: OpaquePointer) { self.handle = handle }
    deinit { PQclear(handle) }

    var status: ExecStatusType { PQresultStatus(handle) }

    public var rowCount: Int { Int(PQntuples(handle)) }
    public var columnCount: Int { Int(PQnfields(handle)) }

    public func columnName(_ column: Int) -> String {
        String(cString: PQfname(handle, Int32(column)))
    }

    /// Rows affected by INSERT/UPDATE/DELETE (PQcmdTuples), 0 when not applicable.
    public var affectedRows: Int {
        Int(String(cString: PQcmdTuples(handle))) ?? 0
    }

    public func isNull(_ row: Int, _ column: Int) -> Bool {
        PQgetisnull(handle, Int32(row), Int32(column)) == 1
    }

    /// The value in text format, nil for SQL NULL.
    public func string(_ row: Int, _ column: Int) -> String? {
        if isNull(row, column) { return nil }
        return String(cString: PQgetvalue(handle, Int32(row), Int32(column)))
    }

    /// The value's length in bytes (0 for SQL NULL).
    public func length(_ row: Int, _ column: Int) -> Int {
        Int(PQgetlength(handle, Int32(row), Int32(column)))
    }

    /// The value's bytes, valid while this result lives; nil for SQL NULL.
    /// Called for every value a FIND streams: NULL has length 0, so only empty values are
    /// asked whether they are NULL (two libpq calls a value instead of three).
    public func bytes(_ row: Int, _ column: Int) -> UnsafeBufferPointer<UInt8>? {
        let length = Int(PQgetlength(handle, Int32(row), Int32(column)))
        if length == 0 && PQgetisnull(handle, Int32(row), Int32(column)) == 1 { return nil }
        let pointer = UnsafeRawPointer(PQgetvalue(handle, Int32(row), Int32(column))!)
        return UnsafeBufferPointer(start: pointer.assumingMemoryBound(to: UInt8.self), count: length)
    }

    public func int(_ row: Int, _ column: Int) -> Int? {
        string(row, column).flatMap { Int($0) }
    }

    public func bool(_ row: Int, _ column: Int) -> Bool? {
        string(row, column).map { $0 == "t" }
    }

    /// All values of one column, in text format.
    public func column(_ column: Int) -> [String?] {
        (0..<rowCount).map { string($0, column) }
    }
}
