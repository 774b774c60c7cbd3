#if canImport(Glibc)
import Glibc
#endif
import CSystem

/// A non-blocking TCP listening socket.
struct Listener {
    let fd: Int32
    /// The address actually bound (the port is filled in when 0 was asked for).
    let host: String
    let port: Int

    /// Binds `host:port` (IPv4 or IPv6 literal, or `localhost`).
    init(host: String, port: Int, backlog: Int32 = 4096) throws {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV
        var info: UnsafeMutablePointer<addrinfo>?
        let lookup = getaddrinfo(host == "*" ? nil : host, String(port), &hints, &info)
        guard lookup == 0, let first = info else {
            throw SystemError(call: "getaddrinfo(\(host)): \(String(cString: gai_strerror(lookup)))", errno: 0)
        }
        defer { freeaddrinfo(info) }
        let fd = try syscall("socket") { csystem_socket(first.pointee.ai_family) }
        var one: Int32 = 1
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, socklen_t(MemoryLayout<Int32>.size))
        do {
            try syscall("bind \(host):\(port)") { bind(fd, first.pointee.ai_addr, first.pointee.ai_addrlen) }
            try syscall("listen") { listen(fd, backlog) }
        } catch {
            Glibc.close(fd)
            throw error
        }
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        _ = withUnsafeMutablePointer(to: &storage) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &length) }
        }
        var boundPort = port
        if storage.ss_family == sa_family_t(AF_INET) {
            boundPort = withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) } }
        } else if storage.ss_family == sa_family_t(AF_INET6) {
            boundPort = withUnsafePointer(to: &storage) { $0.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) } }
        }
        self.fd = fd
        self.host = host
        self.port = boundPort
    }

    /// The next pending connection, or nil when none is waiting.
    func accept() throws(SystemError) -> Int32? {
        while true {
            let fd = csystem_accept(self.fd)
            if fd >= 0 { return fd }
            switch errno {
            case EINTR, ECONNABORTED: continue
            case EAGAIN, EWOULDBLOCK: return nil
            default: throw SystemError(call: "accept", errno: errno)
            }
        }
    }

    func close() { _ = Glibc.close(fd) }
}
