import Foundation
import RecordsClient
import RecordsProtocol

/// Runs commands from a file or stdin, pipelined: lines go out together up to a SAVE (or
/// AUTH, USER, QUIT, IMPORT), whose effect must not follow a failure, and replies are read in
/// order. At the first failure it stops, saying where, unless told to go on. A script that ends
/// with changes not saved says so and fails, as `-c` does.
struct ScriptRunner {
    let connection: LineConnection
    let printer: Printer
    let keepGoing: Bool
    /// `--format json|csv`: asked again after a sign-in (FORMAT is refused before one).
    var jsonReplies = false

    /// Verbs sent alone once what precedes them succeeded (the verb table's barriers).
    static let barriers = Set(Verb.allCases.filter(\.facts.barrier))

    func run(lines: [String], name: String) throws -> Int32 {
        connection.onPushed = { [printer] in printer.event($0) }
        var failed = false
        var index = 0
        var lastVerb: Verb?
        while index < lines.count {
            // One segment: up to and including the next barrier, IMPORT data kept whole.
            var segment: [(number: Int, text: String, verb: Verb?)] = []
            var payload = ""
            while index < lines.count {
                var text = Lines.command(lines[index])
                let number = index + 1
                index += 1
                // A trailing `\` continues the command on the next line.
                while text.hasSuffix("\\") && index < lines.count {
                    text = String(text.dropLast()) + Lines.command(lines[index])
                    index += 1
                }
                let trimmed = text.trimmingCharacters(in: .whitespaces)
                // Comments: `-- ...` as in SQL, `# ...` as in shell scripts (no verb starts with #).
                if trimmed.isEmpty || trimmed.hasPrefix("--") || trimmed.hasPrefix("#") { continue }
                let verb = Verb.of(trimmed)
                let before = payload
                do {
                    payload += try FileValues.expand(trimmed, on: connection, jsonReplies: jsonReplies) + "\n"
                } catch let error as UsageError {
                    printer.note("stopped at \(name) line \(number): \(error)")
                    return 1
                }
                if verb == .import {
                    // Its CSV lines, as written, up to a line holding only `.`.
                    var records = CSVRecords()
                    var closed = false
                    while index < lines.count {
                        let data = records.take(lines[index])
                        index += 1
                        if data == "." {
                            closed = true
                            break
                        }
                        payload += CSVRecords.stuffed(data) + "\n"
                    }
                    guard closed else {
                        printer.note("stopped at \(name) line \(number): its IMPORT has no line holding only '.' after its data; nothing of it was sent")
                        return 1
                    }
                    payload += ".\n"
                }
                segment.append((number, trimmed, verb))
                if let verb, Self.barriers.contains(verb) {
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
            for (number, text, verb) in segment {
                let started = Date()
                let reply = try connection.readReply()
                printer.reply(reply, elapsed: Date().timeIntervalSince(started), verb: verb)
                lastVerb = verb
                if !reply.isOK {
                    failed = true
                    if !keepGoing {
                        printer.note("stopped at \(name) line \(number): \(text)")
                        return 1
                    }
                } else if verb == .auth && jsonReplies {
                    _ = try connection.send("FORMAT JSON")
                }
            }
        }
        // The session ends with the script: changes not saved would be dropped without a word.
        if lastVerb != .quit {
            let pending = try Shell.pendingCount(on: connection)
            if pending > 0 {
                printer.note("records: \(pending) pending change(s) not saved: the session ends with the script; end it with SAVE")
                return 1
            }
        }
        return failed ? 1 : 0
    }
}
