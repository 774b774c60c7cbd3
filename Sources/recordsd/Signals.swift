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
