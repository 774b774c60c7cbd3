/// A streamed reply's data lines on their way to the sink: gathered, and handed over 64 KiB at
/// a time (FIND's records, EXPORT's CSV).
struct StreamBatch {
    static let size = 64 * 1024

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
