#if canImport(Glibc)
import Glibc
#endif

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
