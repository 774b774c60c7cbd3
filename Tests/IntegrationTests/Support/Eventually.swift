#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// Reads `value` again every `interval` microseconds until `done` holds or `tries` reads were
/// made, and returns the last one: for state another process reaches in its own time. The
/// caller still asserts on what came back.
func eventually<T>(tries: Int = 50, every interval: useconds_t = 100_000,
                   _ value: () throws -> T, until done: (T) -> Bool) rethrows -> T {
    var current = try value()
    var made = 1
    while !done(current) && made < tries {
        usleep(interval)
        current = try value()
        made += 1
    }
    return current
}

/// A value handed to threads a test starts, for uses that are safe across threads by
/// construction (a TestServer's `client()` opens a socket; each thread takes its own element).
final class Handed<Value>: @unchecked Sendable {  // read-only after init; see above
    let value: Value
    init(_ value: Value) { self.value = value }
}

/// A value several threads of a test change, under a lock.
final class Locked<Value>: @unchecked Sendable {  // `stored` guarded by `lock`
    private let lock = NSLock()
    private var stored: Value
    init(_ value: Value) { stored = value }
    func with<T>(_ body: (inout Value) -> T) -> T {
        lock.lock()
        defer { lock.unlock() }
        return body(&stored)
    }
    var value: Value { with { $0 } }
}
