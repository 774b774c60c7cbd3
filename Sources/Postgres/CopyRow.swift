#if canImport(Glibc)
import Glibc
#endif

/// One row of `COPY ... TO STDOUT` in text format, read in place: fields split by tabs, `\N`
/// for NULL, and a backslash before a backslash or a control character COPY escapes (`\n`,
/// `\r`, `\t`, `\b`, `\f`, `\v`). A field's bytes are given still escaped; `string` decodes.
/// Valid only while the buffer it was loaded from lives (one `streamCopy` callback).
/// See https://www.postgresql.org/docs/15/sql-copy.html#id-1.9.3.55.9.2
public struct CopyRow {
    private var base: UnsafePointer<UInt8>?
    /// Where each field starts and ends in the line; a NULL field is empty at `-1`.
    private var starts: [Int] = []
    private var ends: [Int] = []

    public init() {}

    /// Splits `line` (one row, with or without its line feed) into fields; the arrays are
    /// reused from row to row.
    public mutating func load(_ line: UnsafeRawBufferPointer) {
        starts.removeAll(keepingCapacity: true)
        ends.removeAll(keepingCapacity: true)
        guard let start = line.baseAddress?.assumingMemoryBound(to: UInt8.self) else { base = nil; return }
        base = UnsafePointer(start)
        var count = line.count
        if count > 0 && start[count - 1] == 10 { count -= 1 }
        var at = 0
        // memchr, not a byte loop: a debug build (what the tests run) calls a generic a byte.
        while true {
            let rest = count - at
            let tab = rest > 0 ? memchr(start + at, 9, rest) : nil
            let end = tab.map { UnsafeRawPointer($0) - UnsafeRawPointer(start) } ?? count
            if end - at == 2 && start[at] == 92 && start[at + 1] == UInt8(ascii: "N") {
                starts.append(-1)
                ends.append(-1)
            } else {
                starts.append(at)
                ends.append(end)
            }
            guard tab != nil else { break }
            at = end + 1
        }
    }

    public var count: Int { starts.count }

    public func isNull(_ field: Int) -> Bool { starts[field] < 0 }

    /// The field's bytes as COPY wrote them (escaped), nil for NULL.
    public func escaped(_ field: Int) -> UnsafeBufferPointer<UInt8>? {
        let start = starts[field]
        guard start >= 0, let base else { return nil }
        return UnsafeBufferPointer(start: base + start, count: ends[field] - start)
    }

    /// The field's escaped length in bytes (0 for NULL): at least its decoded length.
    public func length(_ field: Int) -> Int { starts[field] < 0 ? 0 : ends[field] - starts[field] }

    /// The value in text format, nil for NULL.
    public func string(_ field: Int) -> String? {
        guard let bytes = escaped(field) else { return nil }
        var decoded: [UInt8] = []
        decoded.reserveCapacity(bytes.count)
        Self.decode(bytes) { decoded.append($0) }
        return String(decoding: decoded, as: UTF8.self)
    }

    /// Calls `byte` with each byte the escaped text stands for.
    public static func decode(_ bytes: UnsafeBufferPointer<UInt8>, _ byte: (UInt8) -> Void) {
        var index = 0
        while index < bytes.count {
            let current = bytes[index]
            index += 1
            if current == 92 && index < bytes.count {
                let (decoded, next) = escape(bytes, after: index)
                byte(decoded)
                index = next
            } else {
                byte(current)
            }
        }
    }

    /// The byte a backslash sequence stands for, and where the text goes on; `index` is just
    /// past the backslash. COPY's text format: the control characters' letters, the octal and
    /// hex forms COPY FROM reads (COPY TO writes none), any other character standing for itself.
    public static func escape(_ bytes: UnsafeBufferPointer<UInt8>, after index: Int) -> (UInt8, Int) {
        let next = bytes[index]
        var end = index + 1
        switch next {
        case UInt8(ascii: "n"): return (10, end)
        case UInt8(ascii: "r"): return (13, end)
        case UInt8(ascii: "t"): return (9, end)
        case UInt8(ascii: "b"): return (8, end)
        case UInt8(ascii: "f"): return (12, end)
        case UInt8(ascii: "v"): return (11, end)
        case UInt8(ascii: "0")...UInt8(ascii: "7"):
            var value = Int(next - 48)
            while end < bytes.count, end - index < 3, (48...55).contains(bytes[end]) {
                value = value * 8 + Int(bytes[end] - 48)
                end += 1
            }
            return (UInt8(truncatingIfNeeded: value), end)
        case UInt8(ascii: "x") where end < bytes.count && hexValue(bytes[end]) != nil:
            var value = hexValue(bytes[end])!
            end += 1
            if end < bytes.count, let low = hexValue(bytes[end]) {
                value = value * 16 + low
                end += 1
            }
            return (UInt8(value), end)
        default:
            return (next, end)
        }
    }

    private static func hexValue(_ byte: UInt8) -> Int? {
        switch byte {
        case 48...57: Int(byte - 48)
        case 65...70: Int(byte - 55)
        case 97...102: Int(byte - 87)
        default: nil
        }
    }
}
