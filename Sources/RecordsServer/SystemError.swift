#if canImport(Glibc)
import Glibc
#endif

/// A failed system call: its name and errno.
public struct SystemError: Error, CustomStringConvertible {
    public var call: String
    public var errno: Int32

    public var description: String { "\(call): \(String(cString: strerror(errno)))" }
}

/// Runs a system call, retrying on EINTR; a negative result throws with errno.
@discardableResult
func syscall(_ name: String, _ body: () -> Int32) throws(SystemError) -> Int32 {
    while true {
        let result = body()
        if result >= 0 { return result }
        if errno == EINTR { continue }
        throw SystemError(call: name, errno: errno)
    }
}
