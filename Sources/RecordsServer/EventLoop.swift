#if canImport(Glibc)
import Glibc
#endif
import CSystem
import Foundation

/// A single-threaded epoll loop. Everything it holds is confined to the thread that runs it:
/// other threads reach it only through its `inbox`, with `Sendable` messages.
final class EventLoop<Message: Sendable> {
    typealias Handler = (_ events: UInt32) -> Void

    private let epollFD: Int32
    private var handlers: [Int32: Handler] = [:]
    /// Work the loop gives itself for its next turn (after the sockets have had theirs).
    private var later: [() -> Void] = []
    /// Work for a later time (uptime nanoseconds), soonest last.
    private var timers: [(deadline: UInt64, work: () -> Void)] = []
    let inbox: LoopInbox<Message>

    init() throws {
        epollFD = try syscall("epoll_create1") { csystem_epoll_create() }
        inbox = try LoopInbox()
        try add(inbox.wakeFD, events: CSYSTEM_EPOLLIN) { [inbox] _ in inbox.drainWake() }
    }

    deinit {
        close(epollFD)
    }

    func add(_ fd: Int32, events: UInt32, handler: @escaping Handler) throws(SystemError) {
        var event = epoll_event()
        event.events = events
        event.data.fd = fd
        try syscall("epoll_ctl add") { epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event) }
        handlers[fd] = handler
    }

    func modify(_ fd: Int32, events: UInt32) {
        var event = epoll_event()
        event.events = events
        event.data.fd = fd
        _ = epoll_ctl(epollFD, EPOLL_CTL_MOD, fd, &event)
    }

    func remove(_ fd: Int32) {
        _ = epoll_ctl(epollFD, EPOLL_CTL_DEL, fd, nil)
        handlers[fd] = nil
    }

    /// Runs `work` at the next turn, on the loop. Only from the loop.
    func nextTurn(_ work: @escaping () -> Void) {
        later.append(work)
    }

    /// Runs `work` on the loop once `seconds` have passed. Only from the loop.
    func after(_ seconds: Double, _ work: @escaping () -> Void) {
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(max(0, seconds) * 1e9)
        let index = timers.firstIndex { $0.deadline < deadline } ?? timers.count
        timers.insert((deadline, work), at: index)
    }

    /// Waits for events and dispatches them until `shouldStop` says so; messages from other
    /// threads go to `receive`; `tick` runs at least every `tickMilliseconds`.
    func run(tickMilliseconds: Int32 = 500, tick: () -> Void, receive: (Message) -> Void, shouldStop: () -> Bool) {
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        var lastTick = DispatchTime.now().uptimeNanoseconds
        while !shouldStop() {
            let idle = later.isEmpty && inbox.sleepIfEmpty()
            var timeout = idle ? tickMilliseconds : 0
            if idle, let soonest = timers.last?.deadline {
                let now = DispatchTime.now().uptimeNanoseconds
                timeout = soonest <= now ? 0 : min(timeout, Int32((soonest - now) / 1_000_000) + 1)
            }
            let count = epoll_wait(epollFD, &events, Int32(events.count), timeout)
            if idle { inbox.awake() }
            if count > 0 {
                for i in 0..<Int(count) {
                    let fd = events[i].data.fd
                    handlers[fd]?(events[i].events)
                }
            }
            runPosted(receive)
            let now = DispatchTime.now().uptimeNanoseconds
            if now - lastTick >= UInt64(tickMilliseconds) * 1_000_000 {
                lastTick = now
                tick()
            }
        }
        runPosted(receive)
    }

    /// Runs what was posted before this call; what that posts waits for the next turn, after
    /// the sockets have had theirs (a session re-posting itself cannot starve the others).
    private func runPosted(_ receive: (Message) -> Void) {
        inbox.take().forEach(receive)
        let now = DispatchTime.now().uptimeNanoseconds
        while let soonest = timers.last, soonest.deadline <= now {
            timers.removeLast()
            soonest.work()
        }
        let work = later
        later.removeAll()
        work.forEach { $0() }
    }
}

/// What a socket is ready for (epoll's bits).
enum Readiness {
    static let readable = CSYSTEM_EPOLLIN
    static let writable = CSYSTEM_EPOLLOUT
    static let hangup = CSYSTEM_EPOLLHUP | CSYSTEM_EPOLLERR
}

/// Messages for a loop from other threads: a queue under a lock, and an eventfd written only
/// while the loop sleeps (an awake loop takes the queue at the end of its turn anyway).
final class LoopInbox<Message: Sendable>: @unchecked Sendable {  // `messages` and `sleeping` guarded by `lock`; `wakeFD` immutable
    let wakeFD: Int32
    private let lock = NSLock()
    private var messages: [Message] = []
    private var sleeping = false

    init() throws(SystemError) {
        wakeFD = try syscall("eventfd") { csystem_eventfd() }
    }

    deinit {
        close(wakeFD)
    }

    /// Hands `message` to the loop. Safe from any thread.
    func post(_ message: Message) {
        lock.lock()
        messages.append(message)
        let wake = sleeping
        sleeping = false
        lock.unlock()
        guard wake else { return }
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    /// The loop is about to wait: true (and marked sleeping) when nothing is queued.
    fileprivate func sleepIfEmpty() -> Bool {
        lock.lock()
        defer { lock.unlock() }
        sleeping = messages.isEmpty
        return sleeping
    }

    fileprivate func awake() {
        lock.lock()
        sleeping = false
        lock.unlock()
    }

    fileprivate func take() -> [Message] {
        lock.lock()
        defer { lock.unlock() }
        guard !messages.isEmpty else { return [] }
        let taken = messages
        messages.removeAll()
        return taken
    }

    fileprivate func drainWake() {
        var value: UInt64 = 0
        _ = read(wakeFD, &value, 8)
    }
}
