/// Splits a byte stream into request lines (LF or CRLF), bounded in length.
///
/// Pure and incremental: feed it whatever `read` returned, take the lines it has. A line longer
/// than `maxLineLength` yields `.tooLong` once and is discarded up to its LF, so the
/// connection stays usable. Bytes that are not UTF-8 (or hold a NUL) yield `.invalid`.
public struct LineFramer: Sendable {
    public enum Event: Equatable, Sendable {
        case line(String)
        case tooLong(length: Int)
        case invalid(reason: String)
    }

    public let maxLineLength: Int
    /// While set, a CR before the LF stays in the line: IMPORT's CSV may hold a CR LF inside a
    /// quoted field, which must arrive as it was sent.
    public var keepsCarriageReturns = false
    private var buffer: [UInt8] = []
    private var scanned = 0
    private var discarding = false
    private var discarded = 0

    public init(maxLineLength: Int = 1 << 20) {
        self.maxLineLength = maxLineLength
    }

    /// Bytes held for an incomplete line.
    public var bufferedByteCount: Int { buffer.count }

    public mutating func append<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        buffer.append(contentsOf: bytes)
    }

    /// The next complete event, or nil when more bytes are needed.
    public mutating func next() -> Event? {
        while true {
            guard let newline = buffer[scanned...].firstIndex(of: UInt8(ascii: "\n")) else {
                scanned = buffer.count
                if discarding {
                    discarded += buffer.count
                    buffer.removeAll(keepingCapacity: false)
                    scanned = 0
                } else if buffer.count > maxLineLength {
                    discarding = true
                    discarded = buffer.count
                    buffer.removeAll(keepingCapacity: false)
                    scanned = 0
                    return .tooLong(length: discarded)
                }
                return nil
            }
            var end = newline
            if !keepsCarriageReturns, end > 0, buffer[end - 1] == UInt8(ascii: "\r") { end -= 1 }
            let length = end
            defer {
                buffer.removeSubrange(0...newline)
                scanned = 0
            }
            if discarding {
                discarding = false
                discarded = 0
                continue
            }
            if length > maxLineLength { return .tooLong(length: length) }
            let bytes = buffer[0..<end]
            if bytes.contains(0) { return .invalid(reason: "NUL byte in line") }
            guard let text = String(validating: bytes, as: UTF8.self) else {
                return .invalid(reason: "line is not valid UTF-8")
            }
            return .line(text)
        }
    }
}
