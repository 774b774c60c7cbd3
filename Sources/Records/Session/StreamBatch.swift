/// A streamed reply's data lines on their way to the sink: gathered, and handed over 256 KiB at
/// a time (FIND's records, EXPORT's CSV). 64 KiB batches woke the loop and the worker four
/// times as often, 1,600 times in a FIND of 10⁶ rows: each wake-up is a context switch where
/// two cores are shared by four busy threads.
///
/// The lines are written in place, into an array the batch then hands over as it is: a
/// record written into scratch space and appended cost a FIND a twentieth of its encoding,
/// and copying each batch into the array the sink takes another 3%.
struct StreamBatch {
    static let size = 256 * 1024
    /// Room for a batch and the record that takes it past `size`, mostly.
    private static let usualCapacity = size + 4096

    /// Space for the batch, every byte of it counted: those past `count` are not yet written.
    private var storage: [UInt8]
    /// Bytes gathered and not yet handed over.
    private(set) var count = 0
    private let sink: LineSink
    private var gone = false

    init(to sink: LineSink) {
        self.sink = sink
        storage = Self.space(Self.usualCapacity)
    }

    /// An array of `capacity` bytes left as they are: each is written before it is handed
    /// over, and zero-filling 260 KiB a batch would cost what the copy did.
    private static func space(_ capacity: Int) -> [UInt8] {
        [UInt8](unsafeUninitializedCapacity: capacity) { _, initialized in initialized = capacity }
    }

    /// Lets `body` write at most `most` bytes at the end; it returns how many it wrote.
    mutating func write(atMost most: Int, _ body: (UnsafeMutablePointer<UInt8>) -> Int) {
        if count + most > storage.count { grow(to: count + most) }
        let start = count
        count += storage.withUnsafeMutableBufferPointer { body($0.baseAddress! + start) }
    }

    mutating func append(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress, !bytes.isEmpty else { return }
        write(atMost: bytes.count) { out in
            UnsafeMutableRawPointer(out).copyMemory(from: source, byteCount: bytes.count)
            return bytes.count
        }
    }

    /// Hands the bytes over once there are enough; false when the client has gone.
    mutating func sendIfFull() -> Bool {
        guard count >= Self.size else { return true }
        gone = !sink.send(taken())
        return !gone
    }

    /// Hands over what is left.
    mutating func finish() {
        if count > 0 && !gone { _ = sink.send(taken()) }
    }

    /// The gathered bytes, in the batch's own array; the batch starts again in a new one of
    /// its usual size.
    private mutating func taken() -> [UInt8] {
        var bytes = storage
        storage = Self.space(Self.usualCapacity)
        bytes.removeLast(bytes.count - count)
        count = 0
        return bytes
    }

    private mutating func grow(to needed: Int) {
        var larger = Self.space(max(needed, 2 * storage.count))
        larger.replaceSubrange(0..<count, with: storage[..<count])
        storage = larger
    }
}

/// A work's sink as the work sees it, counting the bytes it streams (its records; replies go
/// to the client another way) for the command's log record. Used by one worker at a time.
final class CountingSink: LineSink {
    let sink: LineSink
    private(set) var bytes = 0

    init(_ sink: LineSink) { self.sink = sink }

    var stalled: Bool { sink.stalled }
    var stopping: Bool { sink.stopping }
    var left: Bool { sink.left }

    func send(_ lines: [UInt8]) -> Bool {
        bytes += lines.count
        return sink.send(lines)
    }
}
