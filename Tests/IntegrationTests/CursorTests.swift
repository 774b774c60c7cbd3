#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing

/// FIND's AFTER cursors are sealed (AES-GCM under `--cursor-secret-file`'s keys): a client can
/// neither read the sort values a cursor holds nor change them to jump elsewhere, another
/// user's cursor is refused, and replicas sharing the file take each other's cursors, through
/// a rotation of its keys. They were hex-encoded JSON, read and forged at will.
@Suite struct CursorTests {
    static func secrets(_ lines: [String]) throws -> String {
        let path = NSTemporaryDirectory() + "recordsd-cursor-\(UUID().uuidString)"
        try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static func cursor(_ status: String) -> String? {
        status.components(separatedBy: "next page: AFTER ").dropFirst().first.map { String($0.prefix { $0 != " " && $0 != ";" }) }
    }

    static func hexDecoded(_ token: String) -> String {
        var bytes: [UInt8] = []
        var rest = token.dropFirst()
        while !rest.isEmpty { bytes.append(UInt8(rest.prefix(2), radix: 16) ?? 0); rest = rest.dropFirst(2) }
        return String(decoding: bytes, as: UTF8.self)
    }

    @Test func cursorsCanBeNeitherReadNorForged() throws {
        let file = try Self.secrets(["first secret of this test, shared"])
        let server = try TestServer(arguments: ["--cursor-secret-file", file])
        let client = try server.client()
        for name in ["Alpha", "Bravo", "Charlie", "Delta"] { try client.ok(#"INSERT game name="\#(name)""#) }
        try client.ok("SAVE")
        let first = try client.send("FIND game ORDER BY name LIMIT 2")
        let token = try #require(Self.cursor(first.status), "\(first)")
        #expect(!Self.hexDecoded(token).contains("Bravo"))
        let next = try client.send("FIND game ORDER BY name LIMIT 2 AFTER \(token)")
        #expect(next.lines.map { $0.contains("Charlie") || $0.contains("Delta") } == [true, true], "\(next)")
        // One digit changed: refused, not a page elsewhere.
        var forged = Array(token)
        forged[forged.count / 2] = forged[forged.count / 2] == "0" ? "1" : "0"
        let refused = try client.send("FIND game ORDER BY name LIMIT 2 AFTER \(String(forged))")
        #expect(refused.status == "-ERR VALIDATION AFTER: this cursor was not given to this session's user by this server's keys, or was changed (pass the one the previous page gave)")
        // The old form, JSON made by hand to skip ahead: refused.
        let handMade = "c" + Array(#"["x","Charlie"]"#.utf8).map { String(format: "%02x", $0) }.joined()
        #expect(try client.send("FIND game ORDER BY name LIMIT 2 AFTER \(handMade)").status.hasPrefix("-ERR VALIDATION AFTER:"))
        // Another user's cursor is not this one's.
        try client.ok(#"USER ADD ann writer "ann-password-1""#)
        try client.ok(#"USER ADD ben writer "ben-password-1""#)
        let ann = try server.client(), ben = try server.client()
        try ann.ok("AUTH ann ann-password-1")
        try ben.ok("AUTH ben ben-password-1")
        let annsToken = try #require(Self.cursor(try ann.send("FIND game ORDER BY name LIMIT 2").status))
        #expect(try ann.send("FIND game ORDER BY name LIMIT 2 AFTER \(annsToken)").lines.count == 2)
        #expect(try ben.send("FIND game ORDER BY name LIMIT 2 AFTER \(annsToken)").status.hasPrefix("-ERR VALIDATION AFTER:"))
    }

    @Test func replicasSharingTheFileTakeEachOthersCursorsThroughARotation() throws {
        let file = try Self.secrets(["the old secret of both replicas"])
        let url = try TestEnvironment.freshDatabase()
        let a = try TestServer(databaseURL: url, arguments: ["--cursor-secret-file", file])
        let b = try TestServer(databaseURL: url, arguments: ["--cursor-secret-file", file], migrations: nil)
        let lone = try TestServer(databaseURL: url, migrations: nil)
        let onA = try a.client(), onB = try b.client()
        for name in ["Alpha", "Bravo", "Charlie"] { try onA.ok(#"INSERT game name="\#(name)""#) }
        try onA.ok("SAVE")
        let old = try #require(Self.cursor(try onA.send("FIND game ORDER BY name LIMIT 1").status))
        #expect(try onB.send("FIND game ORDER BY name LIMIT 1 AFTER \(old)").lines.first?.contains("Bravo") == true)
        // A server with a key of its own does not take them.
        #expect(try lone.client().send("FIND game ORDER BY name LIMIT 1 AFTER \(old)").status.hasPrefix("-ERR VALIDATION AFTER:"))
        // Rotation: a new key first, the old one still accepted until it is dropped.
        try (["the new secret of both replicas", "the old secret of both replicas"].joined(separator: "\n") + "\n").write(toFile: file, atomically: true, encoding: .utf8)
        for server in [a, b] { kill(server.process.processIdentifier, SIGHUP) }
        let reread = { (server: TestServer) in eventually(tries: 50, { server.log }, until: { $0.contains("cursor secrets re-read") }) }
        _ = reread(a); _ = reread(b)
        #expect(try onB.send("FIND game ORDER BY name LIMIT 1 AFTER \(old)").lines.first?.contains("Bravo") == true)
        let new = try #require(Self.cursor(try onA.send("FIND game ORDER BY name LIMIT 1").status))
        try "the new secret of both replicas\n".write(toFile: file, atomically: true, encoding: .utf8)
        for server in [a, b] { kill(server.process.processIdentifier, SIGHUP) }
        _ = eventually(tries: 50, { (try? onB.send("FIND game ORDER BY name LIMIT 1 AFTER \(old)"))?.status ?? "" }, until: { $0.hasPrefix("-ERR") })
        #expect(try onB.send("FIND game ORDER BY name LIMIT 1 AFTER \(old)").status.hasPrefix("-ERR VALIDATION AFTER:"))
        #expect(try onB.send("FIND game ORDER BY name LIMIT 1 AFTER \(new)").lines.first?.contains("Bravo") == true)
    }
}
