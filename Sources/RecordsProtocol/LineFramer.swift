#if canImport(Glibc)
import Glibc
#endif

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
            guard let newline = Self.index(of: UInt8(ascii: "\n"), in: buffer, from: scanned) else {
                scanned = buffer.count
                let pending = buffer.count - start
                // A CR last may be the CR of a CR LF whose LF is still on its way: it does not
                // count against the limit (nor in the length a refusal gives).
                let carriageReturn = buffer.last == UInt8(ascii: "\r") ? 1 : 0
                if discarding {
                    discarded += pending
                    dropAll()
                } else if pending - carriageReturn > maxLineLength {
                    discarding = true
                    discarded = pending
                    dropAll()
                    return .tooLong(length: discarded - carriageReturn)
                }
                return nil
            }
            let lineStart = start
            var end = newline
            // The CR of a CR LF is dropped, or kept in the line (IMPORT's data) without
            // counting against the limit: a row is as long whichever way it ends.
            let carriageReturn = end > lineStart && buffer[end - 1] == UInt8(ascii: "\r") ? 1 : 0
            if !keepsCarriageReturns { end -= carriageReturn }
            let length = end - lineStart
            let counted = keepsCarriageReturns ? length - carriageReturn : length
            let wasDiscarding = discarding
            // Made before the buffer moves on: the line is read in place, never copied first.
            let event: Event?
            if wasDiscarding {
                event = nil
            } else if counted > maxLineLength {
                event = .tooLong(length: counted)
            } else if Self.index(of: 0, in: buffer, from: lineStart, to: end) != nil {
                event = .invalid(reason: "NUL byte in line")
            } else if let text = buffer.withUnsafeBufferPointer({ Self.text(UnsafeBufferPointer(rebasing: $0[lineStart..<end])) }) {
                event = .line(text)
            } else {
                event = .invalid(reason: "line is not valid UTF-8")
            }
            start = newline + 1
            scanned = start
            if start == buffer.count { dropAll() }
            if wasDiscarding {
                discarding = false
                discarded = 0
                continue
            }
            return event
        }
    }

    /// The line as a String, nil when it is not UTF-8. An ASCII line (most are) is taken
    /// without the general validation, which cost more than the rest of the framing.
    private static func text(_ line: UnsafeBufferPointer<UInt8>) -> String? {
        guard let base = line.baseAddress else { return "" }
        let raw = UnsafeRawPointer(base)
        var i = 0
        var high: UInt64 = 0
        while i + 8 <= line.count {
            high |= raw.loadUnaligned(fromByteOffset: i, as: UInt64.self)
            i += 8
        }
        while i < line.count {
            high |= UInt64(line[i])
            i += 1
        }
        if high & 0x8080_8080_8080_8080 == 0 { return String(decoding: line, as: UTF8.self) }
        return String(validating: line, as: UTF8.self)
    }

    /// Where `byte` first is in `bytes[from..<to]` (memchr: this scans every byte received).
    private static func index(of byte: UInt8, in bytes: [UInt8], from: Int, to: Int? = nil) -> Int? {
        let end = to ?? bytes.count
        guard from < end else { return nil }
        return bytes.withUnsafeBufferPointer { buffer in
            guard let base = buffer.baseAddress, let found = memchr(base + from, Int32(byte), end - from) else { return nil }
            return base.distance(to: found.assumingMemoryBound(to: UInt8.self))
        }
    }

    private mutating func dropAll() {
        buffer.removeAll(keepingCapacity: buffer.count <= 1 << 16)
        start = 0
        scanned = 0
    }
}
