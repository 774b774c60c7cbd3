/// Which queued job a free worker takes next. Pure (the clock is passed in), so the pool's
/// fairness is tested without threads or a database.
///
/// A client earns its standing by how long its recent jobs held a connection (`PoolUse`): one
/// whose jobs gave their connection back quickly is `proven`; one whose jobs held it long (a
/// statement that runs long, a SAVE waiting on a row lock, a FIND streaming to a reader that does
/// not read) is `unproven`; a client with no job yet is `new`. Proven jobs go first, then new
/// ones, then unproven ones, each in arrival order. New and unproven jobs, together with any job
/// that has held its worker past `slowAfter`, take at most all but `reserve` workers: however
/// many clients pin connections with slow work, one worker stays for those that give theirs back.
public struct PoolScheduler<Job> {
    public typealias Standing = PoolStanding

    public let size: Int
    /// Workers slow work may never take.
    public let reserve: Int
    /// A job running longer than this counts as slow whatever its standing (nanoseconds).
    public let slowAfter: UInt64

    private var proven = Queue()
    private var new = Queue()
    private var unproven = Queue()
    /// Each busy worker's job: its standing and when it started.
    private var running: [Int: (standing: Standing, started: UInt64)] = [:]

    public init(size: Int, reserve: Int = 1, slowAfter: UInt64 = 1_000_000_000) {
        self.size = size
        self.reserve = size > 1 ? min(reserve, size - 1) : 0
        self.slowAfter = slowAfter
    }

    public var queued: Int { proven.count + new.count + unproven.count }
    public var busy: Int { running.count }

    public mutating func enqueue(_ job: Job, _ standing: Standing) {
        switch standing {
        case .proven: proven.append(job)
        case .new: new.append(job)
        case .unproven: unproven.append(job)
        }
    }

    /// The job `worker` takes now, nil when it must wait.
    public mutating func next(worker: Int, now: UInt64) -> Job? {
        if let job = proven.removeFirst() {
            running[worker] = (.proven, now)
            return job
        }
        guard new.count + unproven.count > 0, slowRunning(now: now) < size - reserve else { return nil }
        if let job = new.removeFirst() {
            running[worker] = (.new, now)
            return job
        }
        running[worker] = (.unproven, now)
        return unproven.removeFirst()
    }

    public mutating func finished(worker: Int) {
        running[worker] = nil
    }

    /// Busy workers whose job is not proven or has run past `slowAfter`.
    public func slowRunning(now: UInt64) -> Int {
        running.values.reduce(0) { count, job in
            count + (job.standing != .proven || now &- job.started >= slowAfter ? 1 : 0)
        }
    }

    /// Removes and returns every queued job (the pool is stopping).
    public mutating func drain() -> [Job] {
        var jobs: [Job] = []
        while let job = proven.removeFirst() { jobs.append(job) }
        while let job = new.removeFirst() { jobs.append(job) }
        while let job = unproven.removeFirst() { jobs.append(job) }
        return jobs
    }

    /// A FIFO whose removals do not shift the array.
    private struct Queue {
        private var items: [Job] = []
        private var head = 0
        var count: Int { items.count - head }
        mutating func append(_ item: Job) { items.append(item) }
        mutating func removeFirst() -> Job? {
            guard head < items.count else { return nil }
            let item = items[head]
            head += 1
            if head > 1024 && head * 2 > items.count {
                items.removeFirst(head)
                head = 0
            } else if head == items.count {
                items.removeAll(keepingCapacity: true)
                head = 0
            }
            return item
        }
    }
}

/// A client's standing with the pool (see `PoolScheduler`).
public enum PoolStanding: Sendable, Equatable { case proven, new, unproven }

/// How long a client's recent jobs held a pooled connection, which gives its standing: new
/// before its first job, proven while its jobs, on a moving average that halves the weight of
/// each older one, held their connection under `provenBelow` seconds, else unproven. Kept by the
/// client's owner (the loop).
public struct PoolUse: Sendable {
    public static let provenBelow = 0.25
    public private(set) var jobs = 0
    /// Seconds, a moving average.
    public private(set) var average = 0.0

    public init() {}

    public mutating func record(seconds: Double) {
        average = jobs == 0 ? seconds : (average + seconds) / 2
        jobs += 1
    }

    public var standing: PoolStanding {
        jobs == 0 ? .new : average < Self.provenBelow ? .proven : .unproven
    }
}
