/// Splits a byte stream into request lines (LF or CRLF), bounded in length.
///
/// Pure and incremental: feed it whatever `read` returned, take the lines it has. Linear in the
/// bytes fed: each byte is scanned once and lines are taken from a moving start, the buffer
/// compacted only when most of it is consumed. A line longer than `maxLineLength` yields
/// `.tooLong` once and is discarded up to its LF, so the connection stays usable. Bytes that are
/// not UTF-8 (or hold a NUL) yield `.invalid`.
public struct LineFramer: Sendable {
    public enum Event: Equatable, Sendable {
        case line(String)
        case tooLong(length: Int)
        case invalid(reason: String)
    }

    /// May change between lines (a session not yet signed in gets a smaller one).
    public var maxLineLength: Int
    /// While set, a CR before the LF stays in the line: IMPORT's CSV may hold a CR LF inside a
    /// quoted field, which must arrive as it was sent.
    public var keepsCarriageReturns = false
    private var buffer: [UInt8] = []
    /// Where the next line starts.
    private var start = 0
    /// Where the search for the next LF resumes (bytes before it hold none).
    private var scanned = 0
    private var discarding = false
    private var discarded = 0

    public init(maxLineLength: Int = 1 << 20) {
        self.maxLineLength = maxLineLength
    }

    /// Bytes held for lines not yet taken.
    public var bufferedByteCount: Int { buffer.count - start }

    /// Drops every byte not yet taken as a line (what a client sent before its TLS handshake).
    public mutating func discardBuffered() {
        buffer.removeAll()
        start = 0
        scanned = 0
        discarding = false
        discarded = 0
    }

    public mutating func append<C: Collection>(_ bytes: C) where C.Element == UInt8 {
        if start > 0 && start * 2 >= buffer.count {
            buffer.removeSubrange(0..<start)
            scanned -= start
            start = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next complete event, or nil when more bytes are needed.
    public mutating func next() -> Event? {
        while true {
            guard let newline = buffer[scanned...].firstIndex(of: UInt8(ascii: "\n")) else {
                scanned = buffer.count
                let pending = buffer.count - start
                if discarding {
                    discarded += pending
                    dropAll()
                } else if pending > maxLineLength {
                    discarding = true
                    discarded = pending
                    dropAll()
                    return .tooLong(length: discarded)
                }
                return nil
            }
            let lineStart = start
            var end = newline
            if !keepsCarriageReturns, end > lineStart, buffer[end - 1] == UInt8(ascii: "\r") { end -= 1 }
            let length = end - lineStart
            let wasDiscarding = discarding
            let bytes = wasDiscarding || length > maxLineLength ? [] : Array(buffer[lineStart..<end])
            start = newline + 1
            scanned = start
            if start == buffer.count { dropAll() }
            if wasDiscarding {
                discarding = false
                discarded = 0
                continue
            }
            if length > maxLineLength { return .tooLong(length: length) }
            if bytes.contains(0) { return .invalid(reason: "NUL byte in line") }
            guard let text = String(validating: bytes, as: UTF8.self) else {
                return .invalid(reason: "line is not valid UTF-8")
            }
            return .line(text)
        }
    }

    private mutating func dropAll() {
        buffer.removeAll(keepingCapacity: buffer.count <= 1 << 16)
        start = 0
        scanned = 0
    }
}
