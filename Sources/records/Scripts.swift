import Foundation
import RecordsClient
import RecordsProtocol

/// Runs commands from a file or stdin, pipelined: lines go out together up to a SAVE (or
/// AUTH, USER, QUIT), whose effect must not follow a failure, and replies are read in order.
/// At the first failure it stops, saying where, unless told to go on.
struct ScriptRunner {
    let connection: LineConnection
    let printer: Printer
    let keepGoing: Bool

    /// Verbs sent alone once what precedes them succeeded (the verb table's barriers).
    static let barriers = Set(Verb.allCases.filter(\.facts.barrier).map(\.rawValue))

    func run(lines: [String], name: String) throws -> Int32 {
        connection.onPushed = { print("! " + $0) }
        var failed = false
        var index = 0
        while index < lines.count {
            // One segment: up to and including the next barrier, IMPORT data kept whole.
            var segment: [(number: Int, text: String)] = []
            var payload = ""
            while index < lines.count {
                var text = lines[index]
                let number = index + 1
                index += 1
                // A trailing `\` continues the command on the next line.
                while text.hasSuffix("\\") && index < lines.count {
                    text = String(text.dropLast()) + lines[index]
                    index += 1
                }
                let trimmed = text.trimmingCharacters(in: .whitespaces)
                // Comments: `-- ...` as in SQL, `# ...` as in shell scripts (no verb starts with #).
                if trimmed.isEmpty || trimmed.hasPrefix("--") || trimmed.hasPrefix("#") { continue }
                let verb = trimmed.split(separator: " ").first.map { $0.uppercased() } ?? ""
                let before = payload
                payload += trimmed + "\n"
                if verb == "IMPORT" {
                    while index < lines.count {
                        let data = lines[index]
                        index += 1
                        payload += data + "\n"
                        if data == "." { break }
                    }
                }
                segment.append((number, trimmed))
                if Self.barriers.contains(verb) && !segment.isEmpty {
                    // The barrier goes alone (with its data, for IMPORT), after what precedes
                    // it succeeded: taken back, it starts the next segment.
                    if segment.count > 1 {
                        segment.removeLast()
                        payload = before
                        index = number - 1
                    }
                    break
                }
            }
            guard !segment.isEmpty else { continue }
            try connection.write(payload)
            for (number, text) in segment {
                let started = Date()
                let reply = try connection.readReply()
                printer.reply(reply, elapsed: Date().timeIntervalSince(started))
                if !reply.isOK {
                    failed = true
                    if !keepGoing {
                        printer.note("stopped at \(name) line \(number): \(text)")
                        return 1
                    }
                }
            }
        }
        return failed ? 1 : 0
    }
}
