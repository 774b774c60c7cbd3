import Foundation
import RecordsClient

// GET by id through RecordsClient, as bench/client_library.sh measures it beside bench/loadgen.c
// on the raw protocol: N clients, each pipelining D GETs and decoding every record, for T seconds.
//   GetBench PORT CLIENTS DEPTH SECONDS ROWS      prints "<gets> <seconds> <per_s>"

struct Employee: RecordsEntity {
    static let entityName = "employee"
    var id: Int
    var firstName: String
    var lastName: String
    var gender: Int
    var age: Int?
    var department: Int?
}

let arguments = CommandLine.arguments.dropFirst().compactMap { Int($0) }
guard arguments.count == 5 else {
    FileHandle.standardError.write("usage: GetBench PORT CLIENTS DEPTH SECONDS ROWS\n".data(using: .utf8)!)
    exit(2)
}
let (port, clients, depth, seconds, rows) = (arguments[0], arguments[1], arguments[2], Double(arguments[3]), arguments[4])
let started = Date()
let total = try await withThrowingTaskGroup(of: Int.self) { group in
    for client in 0..<clients {
        group.addTask {
            let db = try await RecordsClient.connect(host: "127.0.0.1", port: port)
            var done = 0
            var next = client * 7919
            while Date().timeIntervalSince(started) < seconds {
                let lines = (0..<depth).map { _ -> String in
                    next = next % rows + 1
                    return "GET employee \(next)"
                }
                for reply in try await db.pipeline(lines) {
                    guard try reply.records(Employee.self).count == 1 else { throw RecordsError.protocolViolation("no record") }
                }
                done += depth
            }
            await db.close()
            return done
        }
    }
    var sum = 0
    for try await count in group { sum += count }
    return sum
}
let elapsed = Date().timeIntervalSince(started)
print("\(total) \(String(format: "%.2f", elapsed)) \(String(format: "%.0f", Double(total) / elapsed))")
