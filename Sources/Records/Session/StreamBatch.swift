/// A streamed reply's data lines on their way to the sink: gathered, and handed over 256 KiB at
/// a time (FIND's records, EXPORT's CSV). 64 KiB batches woke the loop and the worker four
/// times as often, 1,600 times in a FIND of 10⁶ rows: each wake-up is a context switch where
/// two cores are shared by four busy threads.
///
/// The lines are written in place, into storage of the batch's own, and copied once a batch
/// into the array the sink takes: a record written into scratch space and appended to an
/// array cost a FIND a twentieth of its encoding. Its owner calls `deallocate` when done.
struct StreamBatch {
    static let size = 256 * 1024
    /// Room for a batch and the record that takes it past `size`, mostly.
    private static let usualCapacity = size + 4096

    private var storage: UnsafeMutablePointer<UInt8>
    private var capacity: Int
    /// Bytes gathered and not yet handed over.
    private(set) var count = 0
    private let sink: LineSink
    private var gone = false

    init(to sink: LineSink) {
        self.sink = sink
        capacity = Self.usualCapacity
        storage = .allocate(capacity: capacity)
    }

    func deallocate() { storage.deallocate() }

    /// Lets `body` write at most `most` bytes at the end; it returns how many it wrote.
    mutating func write(atMost most: Int, _ body: (UnsafeMutablePointer<UInt8>) -> Int) {
        if count + most > capacity { grow(to: count + most) }
        count += body(storage + count)
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

    /// The gathered bytes as the array the sink keeps; the batch starts again (at its usual
    /// size, after a record larger than a batch).
    private mutating func taken() -> [UInt8] {
        let bytes = [UInt8](UnsafeBufferPointer(start: storage, count: count))
        count = 0
        if capacity > Self.usualCapacity {
            storage.deallocate()
            capacity = Self.usualCapacity
            storage = .allocate(capacity: capacity)
        }
        return bytes
    }

    private mutating func grow(to needed: Int) {
        capacity = max(needed, 2 * capacity)
        let larger = UnsafeMutablePointer<UInt8>.allocate(capacity: capacity)
        larger.update(from: storage, count: count)
        storage.deallocate()
        storage = larger
    }
}
