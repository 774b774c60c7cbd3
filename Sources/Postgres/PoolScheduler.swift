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

    /// The four lanes, in the order a free worker looks at them; all but proven hold jobs that
    /// count as slow.
    private enum Lane: Int, CaseIterable { case proven, streams, new, unproven }
    private var lanes = [Queue](repeating: Queue(), count: Lane.allCases.count)
    /// Each busy worker's job: whether it counts as slow from its start, when it started, and
    /// its lane and queueing time (for a job given back).
    private var running: [Int: (slow: Bool, started: UInt64, lane: Lane, at: UInt64)] = [:]

    public init(size: Int, reserve: Int = 1, slowAfter: UInt64 = 1_000_000_000, agedAfter: UInt64 = 2_000_000_000) {
        self.size = size
        self.reserve = size > 1 ? min(reserve, size - 1) : 0
        self.slowAfter = slowAfter
        self.agedAfter = agedAfter
    }

    public var queued: Int { lanes.reduce(0) { $0 + $1.count } }
    public var busy: Int { running.count }

    /// - Parameters:
    ///   - streams: the job holds its connection while its client reads (FIND, EXPORT).
    ///   - at: when it was queued (uptime nanoseconds, the clock `next` is given).
    public mutating func enqueue(_ job: Job, _ standing: Standing, streams: Bool = false, at: UInt64) {
        let lane: Lane = switch standing {
        case .proven: streams ? .streams : .proven
        case .new: .new
        case .unproven: .unproven
        }
        lanes[lane.rawValue].append((job, at))
    }

    /// The job `worker` takes now, nil when it must wait.
    public mutating func next(worker: Int, now: UInt64) -> Job? {
        // The first held-back lane with a job, and the one whose first job waited longest.
        var first: Lane?, oldest: Lane?
        for raw in Lane.streams.rawValue...Lane.unproven.rawValue {  // no array a call: a job each
            let lane = Lane(rawValue: raw)!
            guard let head = lanes[raw].first else { continue }
            if first == nil { first = lane }
            if oldest.map({ head.at < lanes[$0.rawValue].first!.at }) ?? true { oldest = lane }
        }
        let slowRoom = first != nil && slowRunning(now: now) < size - reserve
        // A held-back job that has waited `agedAfter` goes before proven ones.
        if slowRoom, let oldest, now &- lanes[oldest.rawValue].first!.at >= agedAfter { return take(oldest, worker: worker, now: now) }
        if lanes[Lane.proven.rawValue].count > 0 { return take(.proven, worker: worker, now: now) }
        guard slowRoom, let first else { return nil }
        return take(first, worker: worker, now: now)
    }

    /// When the job `worker` runs was queued (uptime nanoseconds).
    public func queuedAt(worker: Int) -> UInt64? { running[worker]?.at }

    private mutating func take(_ lane: Lane, worker: Int, now: UInt64) -> Job? {
        guard let item = lanes[lane.rawValue].removeFirst() else { return nil }
        running[worker] = (lane != .proven, now, lane, item.at)
        return item.job
    }

    /// `worker` could not run `job` (it has no connection and cannot open one while others
    /// have theirs): the job goes back to the head of its lane, first for the next free worker.
    public mutating func giveBack(_ job: Job, worker: Int) {
        guard let was = running.removeValue(forKey: worker) else { return }
        lanes[was.lane.rawValue].prepend((job, was.at))
    }

    public mutating func finished(worker: Int) {
        running[worker] = nil
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
        for lane in lanes.indices {
            while let item = lanes[lane].removeFirst() { jobs.append(item.job) }
        }
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
