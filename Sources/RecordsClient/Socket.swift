#if canImport(Glibc)
import Glibc
#endif
import Foundation

/// A blocking TCP socket. Confined to the client's serial queue (never two threads at once).
final class Socket {
    private var fd: Int32
    /// Reused by every read (a fresh 64 KiB array a read cost more than the reply's parsing).
    private var buffer = [UInt8](repeating: 0, count: 65536)

    init(host: String, port: Int) throws(RecordsError) {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            throw .connection("\(host):\(port): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(list) }
        var lastError = ECONNREFUSED
        var address: UnsafeMutablePointer<addrinfo>? = first
        while let candidate = address {
            let fd = socket(candidate.pointee.ai_family, candidate.pointee.ai_socktype, candidate.pointee.ai_protocol)
            if fd >= 0 {
                if Glibc.connect(fd, candidate.pointee.ai_addr, candidate.pointee.ai_addrlen) == 0 {
                    var on: Int32 = 1
                    setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
                    self.fd = fd
                    return
                }
                lastError = errno
                Glibc.close(fd)
            }
            address = candidate.pointee.ai_next
        }
        throw .connection("\(host):\(port): \(String(cString: strerror(lastError)))")
    }

    func write(_ bytes: [UInt8]) throws(RecordsError) {
        var offset = 0
        while offset < bytes.count {
            let sent = bytes.withUnsafeBytes { send(fd, $0.baseAddress! + offset, bytes.count - offset, Int32(MSG_NOSIGNAL)) }
            if sent < 0 {
                if errno == EINTR { continue }
                throw .connection("write: \(String(cString: strerror(errno)))")
            }
            offset += sent
        }
    }

    /// Some bytes; empty at the end of the stream.
    func read() throws(RecordsError) -> ArraySlice<UInt8> {
        while true {
            let fd = self.fd
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count >= 0 { return buffer[0..<count] }
            if errno == EINTR { continue }
            throw .connection("read: \(String(cString: strerror(errno)))")
        }
    }

    func shutdownBoth() { _ = shutdown(fd, Int32(SHUT_RDWR)) }

    func close() {
        if fd >= 0 { Glibc.close(fd) }
        fd = -1
    }

    deinit { close() }
}
