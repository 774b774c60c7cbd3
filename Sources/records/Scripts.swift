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

    /// Lines sent together: up to and including a barrier, IMPORT data kept whole.
    struct Segment {
        var commands: [(number: Int, text: String, verb: Verb?)] = []
        var payload = ""
    }

    /// Why a script stopped before its end: said, and the exit status is 1.
    struct Stopped: Error {
        let note: String
    }

    func run(lines: [String], name: String) throws -> Int32 {
        connection.onPushed = { [printer] in printer.event($0) }
        var failed = false
        var index = 0
        var lastVerb: Verb?
        do {
            while index < lines.count {
                let segment = try nextSegment(lines, from: &index, name: name)
                guard !segment.commands.isEmpty else { continue }
                try connection.write(segment.payload)
                for (number, text, verb) in segment.commands {
                    let started = Date()
                    let reply = try connection.readReply()
                    printer.reply(reply, elapsed: Date().timeIntervalSince(started), verb: verb)
                    lastVerb = verb
                    if !reply.isOK {
                        failed = true
                        if !keepGoing { throw Stopped(note: "stopped at \(name) line \(number): \(text)") }
                    } else if verb == .auth && jsonReplies {
                        _ = try connection.send("FORMAT JSON")
                    }
                }
            }
        } catch let stopped as Stopped {
            printer.note(stopped.note)
            return 1
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

    /// The segment that starts at `index`, which moves past it. A barrier goes alone (with its
    /// data, for IMPORT), after what precedes it succeeded: met after other commands, it is
    /// left to start the next segment.
    func nextSegment(_ lines: [String], from index: inout Int, name: String) throws -> Segment {
        var segment = Segment()
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
            let before = segment.payload
            do {
                segment.payload += try FileValues.expand(trimmed, on: connection, jsonReplies: jsonReplies) + "\n"
            } catch let error as UsageError {
                throw Stopped(note: "stopped at \(name) line \(number): \(error)")
            }
            if verb == .import {
                guard let data = importData(lines, from: &index) else {
                    throw Stopped(note: "stopped at \(name) line \(number): its IMPORT has no line holding only '.' after its data; nothing of it was sent")
                }
                segment.payload += data
            }
            segment.commands.append((number, trimmed, verb))
            if let verb, Self.barriers.contains(verb) {
                if segment.commands.count > 1 {
                    segment.commands.removeLast()
                    segment.payload = before
                    index = number - 1
                }
                break
            }
        }
        return segment
    }

    /// An IMPORT's CSV lines, as written, up to a line holding only `.` (sent dot-stuffed,
    /// with the `.`); nil when no such line comes.
    func importData(_ lines: [String], from index: inout Int) -> String? {
        var records = CSVRecords()
        var payload = ""
        while index < lines.count {
            let data = records.take(lines[index])
            index += 1
            if data == "." { return payload + ".\n" }
            payload += CSVRecords.stuffed(data) + "\n"
        }
        return nil
    }
}
