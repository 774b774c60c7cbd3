/// Pushed lines (`! ...`) rendered once for every session that receives them: a change to
/// 300,000 records watched by 200 sessions is 300,000 lines in memory, not 60 million.
final class PushLines: Sendable {
    /// Each line's bytes, `! ` and the line feed included.
    let lines: [[UInt8]]

    init(_ lines: [String]) {
        self.lines = lines.map { Array(("! " + $0 + "\n").utf8) }
    }
}

/// One session's pushed lines not yet written, oldest first: references to shared `PushLines`,
/// bounded by `limit` lines; past it the oldest are dropped and counted, and the session is
/// told how many.
struct PushQueue {
    static let limit = 10_000

    private var batches: [(lines: PushLines, next: Int)] = []
    private var head = 0
    private(set) var count = 0
    /// Lines dropped since the session was last told.
    var dropped = 0

    var isEmpty: Bool { count == 0 }

    mutating func append(_ lines: PushLines) {
        guard !lines.lines.isEmpty else { return }
        batches.append((lines, 0))
        count += lines.lines.count
        while count > Self.limit, head < batches.count {
            let excess = count - Self.limit
            let left = batches[head].lines.lines.count - batches[head].next
            if left <= excess {
                dropped += left
                count -= left
                head += 1
            } else {
                batches[head].next += excess
                dropped += excess
                count -= excess
            }
        }
        compact()
    }

    /// The next line's bytes, taken off the queue.
    mutating func pop() -> [UInt8]? {
        while head < batches.count {
            let batch = batches[head]
            if batch.next < batch.lines.lines.count {
                batches[head].next += 1
                count -= 1
                return batch.lines.lines[batch.next]
            }
            head += 1
        }
        compact()
        return nil
    }

    private mutating func compact() {
        if head > 64 && head * 2 > batches.count {
            batches.removeFirst(head)
            head = 0
        }
        if head == batches.count {
            batches.removeAll(keepingCapacity: true)
            head = 0
        }
    }
}
