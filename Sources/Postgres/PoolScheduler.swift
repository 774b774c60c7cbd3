import Dispatch

/// Which queued job a free worker takes next. Pure (the clock is passed in), so the pool's
/// fairness is tested without threads or a database.
///
/// A client earns its standing by how long its recent jobs held a connection (`PoolUse`): one
/// whose jobs gave their connection back quickly is `proven`; one whose jobs held it long (a
/// statement that runs long, a SAVE waiting on a row lock, a FIND streaming to a reader that does
/// not read) is `unproven`; a client with no job yet is `new`. A job that streams (a FIND or
/// EXPORT holds its connection as long as its client reads) is slow by nature. Proven jobs that
/// do not stream go first and may take any worker; streaming, new and unproven jobs follow in
/// that order, and, with any job that has held its worker past `slowAfter`, take at most all but
/// `reserve` workers: however many clients pin connections, one worker stays for those that give
/// theirs back. A job held back for `agedAfter` goes before proven ones (within the same
/// bound): under a steady stream of proven work it would otherwise wait for ever.
public struct PoolScheduler<Job> {
    public typealias Standing = PoolStanding

    public let size: Int
    /// Workers slow work may never take.
    public let reserve: Int
    /// A job running longer than this counts as slow whatever its standing (nanoseconds).
    public let slowAfter: UInt64
    /// A streaming, new or unproven job waiting this long is taken before proven ones
    /// (nanoseconds). A client whose jobs were slow while PostgreSQL failed over (each waited
    /// for the new primary) stayed unproven for a minute, and 50 busy proven clients kept its
    /// reads waiting all that minute.
    public let agedAfter: UInt64

    private var proven = Queue()
    private var streams = Queue()
    private var new = Queue()
    private var unproven = Queue()
    /// Each busy worker's job: whether it counts as slow from its start, and when it started.
    private var running: [Int: (slow: Bool, started: UInt64)] = [:]

    public init(size: Int, reserve: Int = 1, slowAfter: UInt64 = 1_000_000_000, agedAfter: UInt64 = 2_000_000_000) {
        self.size = size
        self.reserve = size > 1 ? min(reserve, size - 1) : 0
        self.slowAfter = slowAfter
        self.agedAfter = agedAfter
    }

    public var queued: Int { proven.count + streams.count + new.count + unproven.count }
    public var busy: Int { running.count }

    /// - Parameters:
    ///   - streams: the job holds its connection while its client reads (FIND, EXPORT).
    ///   - at: when it was queued (uptime nanoseconds, the clock `next` is given).
    public mutating func enqueue(_ job: Job, _ standing: Standing, streams: Bool = false, at: UInt64) {
        switch standing {
        case .proven: if streams { self.streams.append((job, at)) } else { proven.append((job, at)) }
        case .new: new.append((job, at))
        case .unproven: unproven.append((job, at))
        }
    }

    /// The job `worker` takes now, nil when it must wait.
    public mutating func next(worker: Int, now: UInt64) -> Job? {
        let slowRoom = streams.count + new.count + unproven.count > 0 && slowRunning(now: now) < size - reserve
        // The longest-waiting held-back job, once it has waited `agedAfter`, goes first.
        if slowRoom, proven.count > 0,
           let oldest = [streams.first?.at, new.first?.at, unproven.first?.at].compactMap({ $0 }).min(), now &- oldest >= agedAfter {
            let lane = streams.first?.at == oldest ? 0 : new.first?.at == oldest ? 1 : 2
            let job = lane == 0 ? streams.removeFirst() : lane == 1 ? new.removeFirst() : unproven.removeFirst()
            running[worker] = (true, now)
            return job?.job
        }
        if let job = proven.removeFirst() {
            running[worker] = (false, now)
            return job.job
        }
        guard slowRoom, let job = streams.removeFirst() ?? new.removeFirst() ?? unproven.removeFirst() else { return nil }
        running[worker] = (true, now)
        return job.job
    }

    public mutating func finished(worker: Int) {
        running[worker] = nil
    }

    /// `worker` could not run `job` (it has no connection and cannot open one while others
    /// have theirs): the job goes back to the head of its lane, first for the next free worker.
    public mutating func giveBack(_ job: Job, _ standing: Standing, streams: Bool = false, worker: Int, queuedAt at: UInt64) {
        running[worker] = nil
        switch standing {
        case .proven: if streams { self.streams.prepend((job, at)) } else { proven.prepend((job, at)) }
        case .new: new.prepend((job, at))
        case .unproven: unproven.prepend((job, at))
        }
    }

    /// Busy workers whose job streams, is not proven, or has run past `slowAfter`.
    public func slowRunning(now: UInt64) -> Int {
        running.values.reduce(0) { count, job in
            count + (job.slow || now &- job.started >= slowAfter ? 1 : 0)
        }
    }

    /// Removes and returns every queued job (the pool is stopping).
    public mutating func drain() -> [Job] {
        var jobs: [Job] = []
        while let job = proven.removeFirst() { jobs.append(job.job) }
        while let job = streams.removeFirst() { jobs.append(job.job) }
        while let job = new.removeFirst() { jobs.append(job.job) }
        while let job = unproven.removeFirst() { jobs.append(job.job) }
        return jobs
    }

    /// A FIFO whose removals do not shift the array; each job with when it was queued.
    private struct Queue {
        typealias Item = (job: Job, at: UInt64)
        private var items: [Item] = []
        private var head = 0
        var count: Int { items.count - head }
        var first: Item? { head < items.count ? items[head] : nil }
        mutating func append(_ item: Item) { items.append(item) }
        mutating func prepend(_ item: Item) {
            if head > 0 {
                head -= 1
                items[head] = item
            } else {
                items.insert(item, at: 0)
            }
        }
        mutating func removeFirst() -> Item? {
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
public enum PoolStanding: Sendable, Hashable { case proven, new, unproven }

/// How long a client's recent jobs held a pooled connection, which gives its standing: new
/// before its first job; unproven for `coolDown` seconds after a job that held its connection
/// `slowJob` seconds or more (quick jobs in between do not win it back), and while the moving
/// average of its jobs (halving the weight of each older one) is `provenBelow` or more; else
/// proven. Kept by the client's owner (the loop).
public struct PoolUse: Sendable {
    public static let provenBelow = 0.25
    public static let slowJob = 1.0
    public static let coolDown: UInt64 = 60_000_000_000
    public private(set) var jobs = 0
    /// Seconds, a moving average.
    public private(set) var average = 0.0
    /// Until when (uptime nanoseconds) the client stays unproven after a slow job.
    public private(set) var slowUntil: UInt64 = 0

    public init() {}

    public mutating func record(seconds: Double, now: UInt64 = DispatchTime.now().uptimeNanoseconds) {
        average = jobs == 0 ? seconds : (average + seconds) / 2
        jobs += 1
        if seconds >= Self.slowJob { slowUntil = now + Self.coolDown }
    }

    public func standing(now: UInt64 = DispatchTime.now().uptimeNanoseconds) -> PoolStanding {
        if jobs == 0 { return .new }
        return now < slowUntil || average >= Self.provenBelow ? .unproven : .proven
    }
}
