#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing

/// The README's first command: no database configured means a private cluster of its own.
@Suite struct EmbeddedPostgresTests {
    @Test func startsItsOwnClusterServesAndStopsItOnSIGINT() throws {
        let directory = NSTemporaryDirectory() + "recordsd-embedded-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        for round in 1...2 {  // creates the cluster, then reuses it
            let process = Process()
            process.executableURL = URL(fileURLWithPath: TestEnvironment.recordsdBinary)
            process.arguments = ["--listen", "127.0.0.1:0", "--data-dir", directory + "/data", "--migrations", TestEnvironment.migrations]
            var environment = ProcessInfo.processInfo.environment
            for key in ["DATABASE_URL", "PGHOST", "PGPORT", "PGDATABASE", "PGUSER"] { environment[key] = nil }
            process.environment = environment
            let output = Pipe()
            process.standardOutput = output
            process.standardError = FileHandle.nullDevice
            try process.run()
            var text = ""
            let deadline = Date().addingTimeInterval(60)
            while Date() < deadline, !text.contains("listening on") {
                let data = output.fileHandleForReading.availableData
                if data.isEmpty { break }
                text += String(decoding: data, as: UTF8.self)
            }
            let port = try #require(Int(text.split(separator: ":").last?.prefix { $0.isNumber } ?? ""), "round \(round): \(text)")
            let client = try LineClient(port: port)
            #expect(try client.send("ENTITIES").status == "+OK 11 entities")
            #expect(try client.send("INFO").lines.contains { $0.hasPrefix("database: embedded PostgreSQL in ") })
            kill(process.processIdentifier, SIGINT)
            process.waitUntilExit()
            #expect(process.terminationStatus == 0)
            // The cluster stopped with the server: its pid file is gone.
            #expect(!FileManager.default.fileExists(atPath: directory + "/data/pgdata/postmaster.pid"), "round \(round)")
        }
    }
}
