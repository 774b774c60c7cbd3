#if canImport(Glibc)
import Glibc
#endif
import CSystem
import Foundation

/// A single-threaded epoll loop. Callbacks run on the loop's thread; other threads hand work
/// to it with `post`, which wakes it through an eventfd.
final class EventLoop: @unchecked Sendable {  // `posted` is guarded by `lock`; the rest is loop-confined
    typealias Handler = (_ events: UInt32) -> Void

    private let epollFD: Int32
    private let wakeFD: Int32
    private var handlers: [Int32: Handler] = [:]
    private let lock = NSLock()
    private var posted: [() -> Void] = []
    /// The loop is in (or about to enter) epoll_wait: only then does `post` need the eventfd.
    private var sleeping = false

    init() throws {
        epollFD = try syscall("epoll_create1") { csystem_epoll_create() }
        wakeFD = try syscall("eventfd") { csystem_eventfd() }
        try add(wakeFD, events: CSYSTEM_EPOLLIN) { [unowned self] _ in
            var value: UInt64 = 0
            _ = read(self.wakeFD, &value, 8)
        }
    }

    deinit {
        close(epollFD)
        close(wakeFD)
    }

    static let readable = CSYSTEM_EPOLLIN
    static let writable = CSYSTEM_EPOLLOUT
    static let hangup = CSYSTEM_EPOLLHUP | CSYSTEM_EPOLLERR

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

    /// Runs `work` on the loop thread soon. Safe from any thread.
    func post(_ work: @escaping () -> Void) {
        lock.lock()
        posted.append(work)
        let wake = sleeping
        sleeping = false
        lock.unlock()
        guard wake else { return }  // an awake loop runs it at the end of this turn
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    /// Waits for events and dispatches them until `shouldStop` says so; `tick` runs at least
    /// every `tickMilliseconds`.
    func run(tickMilliseconds: Int32 = 500, tick: () -> Void, shouldStop: () -> Bool) {
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        var lastTick = DispatchTime.now().uptimeNanoseconds
        while !shouldStop() {
            lock.lock()
            let idle = posted.isEmpty
            sleeping = idle
            lock.unlock()
            let count = epoll_wait(epollFD, &events, Int32(events.count), idle ? tickMilliseconds : 0)
            lock.lock()
            sleeping = false
            lock.unlock()
            if count > 0 {
                for i in 0..<Int(count) {
                    let fd = events[i].data.fd
                    handlers[fd]?(events[i].events)
                }
            }
            runPosted()
            let now = DispatchTime.now().uptimeNanoseconds
            if now - lastTick >= UInt64(tickMilliseconds) * 1_000_000 {
                lastTick = now
                tick()
            }
        }
        runPosted()
    }

    /// Runs what was posted before this call; what that posts waits for the next turn, after
    /// the sockets have had theirs (a session re-posting itself cannot starve the others).
    private func runPosted() {
        lock.lock()
        let work = posted
        posted.removeAll()
        lock.unlock()
        work.forEach { $0() }
    }
}
