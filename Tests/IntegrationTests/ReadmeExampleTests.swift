import Foundation
import RecordsProtocol
import Testing

/// The README's verb table and HELP's examples, run as they are written against a server with
/// the sample schema, so that neither drifts from the server: each is a line the server reads
/// (no SYNTAX) about entities and attributes that exist (no UNKNOWN). What they find depends
/// on the data (an empty table, a #ref not made yet): any other answer is theirs.
@Suite struct ReadmeExampleTests {
    /// The example column of the README's tables whose first column starts with a verb.
    static func readmeExamples() throws -> [String] {
        let readme = try String(contentsOfFile: TestEnvironment.root + "/README.md", encoding: .utf8)
        let verbs = Set(Verb.allCases.map(\.rawValue))
        return readme.split(separator: "\n").compactMap { line -> String? in
            guard line.hasPrefix("| `") else { return nil }
            let cells = line.split(separator: "|", omittingEmptySubsequences: false).map { $0.trimmingCharacters(in: .whitespaces) }
            guard cells.count >= 4, let first = cells[1].dropFirst().split(separator: " ").first.map(String.init),
                  verbs.contains(first.trimmingCharacters(in: CharacterSet(charactersIn: "`"))) else { return nil }
            guard let start = cells[cells.count - 2].firstIndex(of: "`") else { return nil }
            let rest = cells[cells.count - 2][cells[cells.count - 2].index(after: start)...]
            return rest.firstIndex(of: "`").map { String(rest[..<$0]) }
        }
    }

    @Test func everyExampleIsALineTheServerReads() throws {
        let server = try TestServer()
        let readme = try Self.readmeExamples()
        #expect(readme.count >= 30, "\(readme)")
        let help = Verb.allCases.map(\.facts.example)
        // Those that change who may connect, or end the session, go last or not at all.
        let last: Set<Verb> = [.user, .auth]
        let skipped: Set<Verb> = [.quit, .starttls, .import]  // IMPORT waits for its data lines
        let lines = (readme + help).filter { Verb.of($0).map { !skipped.contains($0) } ?? true }
        var failures: [String] = []
        for line in lines.filter({ !last.contains(Verb.of($0) ?? .ping) }) + lines.filter({ last.contains(Verb.of($0) ?? .ping) }) {
            let client = try server.client()
            let reply = try client.send(line)
            if reply.code == .syntax || reply.code == .unknown { failures.append("\(line) -> \(reply.status)") }
        }
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
    }
}
