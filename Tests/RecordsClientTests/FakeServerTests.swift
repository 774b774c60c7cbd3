#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
@testable import RecordsClient

/// The client against a scripted server on loopback: the bytes a real server could send, in
/// awkward pieces, answered to what the client wrote. No recordsd, no PostgreSQL.
/// A one-connection server: for each request line read, the scripted answer, written in
/// pieces of `piece` bytes.
final class FakeScript: @unchecked Sendable {  // fields set before the thread starts, then read only
    let port: Int
    private let listener: Int32

    init(banner: String, answers: [String], piece: Int) throws {
        let socketFD = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        let bound = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socketFD, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        guard bound == 0, listen(socketFD, 1) == 0 else { throw RecordsError.connection("fake server: cannot listen") }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socketFD, $0, &length) } }
        port = Int(UInt16(bigEndian: address.sin_port))
        listener = socketFD
        Thread {
            let fd = accept(socketFD, nil, nil)
            guard fd >= 0 else { return }
            defer { close(fd) }
            func write(_ text: String) {
                var bytes = Array(text.utf8)[...]
                while !bytes.isEmpty {
                    let chunk = Array(bytes.prefix(piece))
                    _ = chunk.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                    bytes = bytes.dropFirst(chunk.count)
                    usleep(200)
                }
            }
            write(banner)
            var pending: [UInt8] = []
            var buffer = [UInt8](repeating: 0, count: 4096)
            for answer in answers {
                while !pending.contains(10) {
                    let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
                    guard count > 0 else { return }
                    pending += buffer[0..<count]
                }
                pending.removeFirst(pending.firstIndex(of: 10)! + 1)
                write(answer)
            }
        }.start()
    }

    deinit { close(listener) }
}

@Suite struct FakeServerTests {
    struct Employee: RecordsEntity, Equatable {
        static let entityName = "employee"
        var id: Int
        var lastName: String
    }

    @Test func piecesPushesEscapesAndErrorsComeOutWhole() async throws {
        for piece in [1, 3, 7, 4096] {
            let script = try FakeScript(banner: "+OK recordsd 0.1.0 ready\n", answers: [
                // A server without CANCEL (an older build): the client goes on without its key.
                "-ERR UNKNOWN unknown verb 'CANCEL': type HELP for the list\n",
                "+OK format json\n",
                // A record, a push in the middle of the reply, a line escaped because it began with -.
                "{\"id\":1,\"last_name\":\"Lee\"}\n! employee 9 inserted\n{\"id\":2,\"last_name\":\"O'Neil\"}\n+OK 2 records; next page: AFTER c1\n",
                "{\"id\":3,\"last_name\":\"Zed\"}\n+OK 1 record\n",
                "#e1 employee: last_name is required\n -a detail that began with a dash\n-ERR VALIDATION 2 problems; nothing was saved\n",
                "+OK #e1 pending insert employee (1 pending)\n",
            ], piece: piece)
            let client = try await RecordsClient.connect(host: "127.0.0.1", port: script.port)
            #expect(client.banner == "+OK recordsd 0.1.0 ready")
            var pages: [[Employee]] = []
            for try await page in client.pages(Employee.self, pageSize: 2) { pages.append(page) }
            #expect(pages == [[Employee(id: 1, lastName: "Lee"), Employee(id: 2, lastName: "O'Neil")], [Employee(id: 3, lastName: "Zed")]], "piece \(piece)")
            #expect(try await client.takePushed() == ["employee 9 inserted"])
            do {
                try await client.save()
                Issue.record("an -ERR reply was taken for success")
            } catch let error as RecordsError {
                #expect(error == .server(code: .validation, message: "2 problems; nothing was saved", details: ["#e1 employee: last_name is required", "-a detail that began with a dash"]))
            }
            #expect(try await client.insert("employee", ["last_name": "O\"Neil"]) == RecordRef("#e1"))
            await client.close()
        }
    }
}
