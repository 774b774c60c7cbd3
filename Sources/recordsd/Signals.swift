#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// Delivers SIGINT, SIGTERM and SIGHUP to a handler on a thread of its own (sigwait), so no
/// work happens in signal context. Call `block()` first thing, before any thread starts.
enum Signals {
    /// The signals handled, as a set (a value made afresh: sigset_t is not Sendable).
    private static func handled() -> sigset_t {
        var set = sigset_t()
        sigemptyset(&set)
        sigaddset(&set, SIGINT)
        sigaddset(&set, SIGTERM)
        sigaddset(&set, SIGHUP)
        return set
    }

    static func block() {
        signal(SIGPIPE, SIG_IGN)
        var signals = handled()
        pthread_sigmask(SIG_BLOCK, &signals, nil)
    }

    /// Waits up to `seconds` for SIGINT or SIGTERM (before the handler runs: start-up waits);
    /// returns the signal, or nil when the time ran out. A SIGHUP meanwhile is dropped.
    static func stopRequested(within seconds: Int) -> Int32? {
        var signals = handled()
        var timeout = timespec(tv_sec: seconds, tv_nsec: 0)
        let deadline = Date().addingTimeInterval(Double(seconds))
        while true {
            let received = sigtimedwait(&signals, nil, &timeout)
            if received == SIGINT || received == SIGTERM { return received }
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return nil }
            timeout = timespec(tv_sec: Int(left), tv_nsec: Int((left - left.rounded(.down)) * 1e9))
        }
    }

    static func handle(_ handler: @escaping @Sendable (Int32) -> Void) {
        let thread = Thread {
            var signals = handled()
            while true {
                var received: Int32 = 0
                if sigwait(&signals, &received) == 0 { handler(received) }
            }
        }
        thread.name = "signals"
        thread.start()
    }
}

/// Lets the server keep 10,000 sockets open: raise the soft file limit to the hard one.
func raiseFileLimit() {
    var limit = rlimit()
    if getrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit) == 0, limit.rlim_cur < limit.rlim_max {
        limit.rlim_cur = limit.rlim_max
        setrlimit(Int32(RLIMIT_NOFILE.rawValue), &limit)
    }
}
