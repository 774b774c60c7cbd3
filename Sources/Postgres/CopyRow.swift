/// One row of `COPY ... TO STDOUT` in text format, read in place: fields split by tabs, `\N`
/// for NULL, and a backslash before a backslash or a control character COPY escapes (`\n`,
/// `\r`, `\t`, `\b`, `\f`, `\v`). A field's bytes are given still escaped; `string` decodes.
/// Valid only while the buffer it was loaded from lives (one `streamCopy` callback).
/// See https://www.postgresql.org/docs/15/sql-copy.html#id-1.9.3.55.9.2
public struct CopyRow {
    @usableFromInline var base: UnsafePointer<UInt8>?
    /// Where each field starts and ends in the line, two to a field; a NULL field is `-1, -1`.
    /// Storage its owner gives back (`deallocate`): the hot loop touches no reference count.
    @usableFromInline var bounds: UnsafeMutablePointer<Int>
    private var capacity: Int
    public private(set) var count = 0
    /// The line's length without its line feed: at least the sum of its fields' lengths.
    public private(set) var byteCount = 0

    /// An empty row to `load` lines into; its owner calls `deallocate` when done.
    public init(capacity: Int = 32) {
        self.capacity = max(1, capacity)
        bounds = .allocate(capacity: 2 * self.capacity)
    }

    public func deallocate() { bounds.deallocate() }

    /// The fields of `line`, read in `body` (a row lives no longer).
    public static func reading<T>(_ line: UnsafeRawBufferPointer, _ body: (CopyRow) throws -> T) rethrows -> T {
        var row = CopyRow()
        defer { row.deallocate() }
        row.load(line)
        return try body(row)
    }

    /// A row's bytes without the line feed COPY ends it with (if it has one).
    @inlinable public static func fields(of line: UnsafeRawBufferPointer) -> UnsafeBufferPointer<UInt8> {
        let start = line.baseAddress?.assumingMemoryBound(to: UInt8.self)
        return UnsafeBufferPointer(start: start, count: line.count > 0 && start?[line.count - 1] == 10 ? line.count - 1 : line.count)
    }

    /// Splits `line` (one row, with or without its line feed) into fields.
    public mutating func load(_ line: UnsafeRawBufferPointer) {
        count = 0
        let text = Self.fields(of: line)
        guard let start = text.baseAddress else { base = nil; byteCount = 0; return }
        base = start
        let length = text.count
        byteCount = length
        // The whole line eight bytes a step, every tab of a word taken from one mask: a row's
        // fields are short, and a search a field (memchr, or words from each field's start)
        // cost several times the bytes it scanned. A pointer and while loops: a Range's
        // iterator would be a generic call a byte in a debug build, what the tests run.
        var fieldStart = 0
        var index = 0
        while index + 8 <= length {
            fields(endingAt: Self.tabs(in: UnsafeRawPointer(start + index).loadUnaligned(as: UInt64.self)), of: index, from: &fieldStart)
            index += 8
        }
        if index < length && length >= 8 {
            // The last bytes as the line's last word, less the bytes already read.
            let last = length - 8
            fields(endingAt: Self.tabs(in: UnsafeRawPointer(start + last).loadUnaligned(as: UInt64.self)) & (~0 << (8 * (index - last))), of: last, from: &fieldStart)
        } else {
            while index < length {
                if start[index] == 9 {
                    field(from: fieldStart, to: index)
                    fieldStart = index + 1
                }
                index += 1
            }
        }
        field(from: fieldStart, to: length)
    }

    /// The fields ended by the tabs `tabs` flags in the word at `offset`.
    @inline(__always) private mutating func fields(endingAt tabs: UInt64, of offset: Int, from fieldStart: inout Int) {
        var tabs = tabs
        while tabs != 0 {
            let tab = offset + tabs.trailingZeroBitCount >> 3
            field(from: fieldStart, to: tab)
            fieldStart = tab + 1
            tabs &= tabs &- 1
        }
    }

    /// 0x80 in each byte of `word` that is a tab, nothing else: exact for every byte, not only
    /// the lowest (the subtracting form can flag a 0x08 byte above a tab).
    @inlinable @inline(__always) static func tabs(in word: UInt64) -> UInt64 {
        let lows: UInt64 = 0x7F7F_7F7F_7F7F_7F7F
        let zeroed = word ^ 0x0909_0909_0909_0909
        return ~(((zeroed & lows) &+ lows) | zeroed | lows)
    }

    @inline(__always) private mutating func field(from start: Int, to end: Int) {
        if count == capacity { grow() }
        if end - start == 2, let base, base[start] == 92, base[start + 1] == UInt8(ascii: "N") {
            bounds[2 * count] = -1
            bounds[2 * count + 1] = -1
        } else {
            bounds[2 * count] = start
            bounds[2 * count + 1] = end
        }
        count += 1
    }

    private mutating func grow() {
        let larger = UnsafeMutablePointer<Int>.allocate(capacity: 4 * capacity)
        larger.update(from: bounds, count: 2 * capacity)
        bounds.deallocate()
        bounds = larger
        capacity *= 2
    }

    @inlinable public func isNull(_ field: Int) -> Bool { bounds[2 * field] < 0 }

    /// Whether the field of `line` (without its line feed) starting at `start` is `\N`, NULL.
    @inlinable public static func isNull(_ line: UnsafeBufferPointer<UInt8>, at start: Int) -> Bool {
        start + 2 <= line.count && line[start] == 92 && line[start + 1] == UInt8(ascii: "N") && (start + 2 == line.count || line[start + 2] == 9)
    }

    /// Where the field of `line` (without its line feed) starting at `start` ends: at the next
    /// tab, else the line's end. Eight bytes a step.
    @inlinable public static func fieldEnd(_ line: UnsafeBufferPointer<UInt8>, from start: Int) -> Int {
        guard let base = line.baseAddress else { return start }
        var index = start
        while index + 8 <= line.count {
            let tabs = tabs(in: UnsafeRawPointer(base + index).loadUnaligned(as: UInt64.self))
            if tabs != 0 { return index + tabs.trailingZeroBitCount >> 3 }
            index += 8
        }
        while index < line.count && base[index] != 9 { index += 1 }
        return index
    }

    /// The field's bytes as COPY wrote them (escaped), nil for NULL.
    @inlinable public func escaped(_ field: Int) -> UnsafeBufferPointer<UInt8>? {
        let start = bounds[2 * field]
        guard start >= 0, let base else { return nil }
        return UnsafeBufferPointer(start: base + start, count: bounds[2 * field + 1] - start)
    }

    /// The field's escaped length in bytes (0 for NULL): at least its decoded length.
    @inlinable public func length(_ field: Int) -> Int { bounds[2 * field + 1] - bounds[2 * field] }

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
