/// A streamed reply's data lines on their way to the sink: gathered, and handed over 256 KiB at
/// a time (FIND's records, EXPORT's CSV). 64 KiB batches woke the loop and the worker four
/// times as often, 1,600 times in a FIND of 10⁶ rows: each wake-up is a context switch where
/// two cores are shared by four busy threads.
struct StreamBatch {
    static let size = 256 * 1024

    var bytes: [UInt8] = []
    private let sink: LineSink
    private var gone = false

    init(to sink: LineSink) {
        self.sink = sink
        bytes.reserveCapacity(Self.size + 4096)
    }

    /// Hands the bytes over once there are enough; false when the client has gone.
    mutating func sendIfFull() -> Bool {
        guard bytes.count >= Self.size else { return true }
        gone = !sink.send(bytes)
        bytes.removeAll(keepingCapacity: true)
        return !gone
    }

    /// Hands over what is left.
    mutating func finish() {
        if !bytes.isEmpty && !gone { _ = sink.send(bytes) }
    }
}
