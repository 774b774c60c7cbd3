import CLibEdit
import Foundation
import RecordsClient
import RecordsProtocol

/// Names offered by tab completion; set before each line is read. libedit calls back into C
/// without a context pointer, so they live here.
private final class Completions: @unchecked Sendable {  // `words` and `matches` guarded by `lock`
    static let shared = Completions()
    private let lock = NSLock()
    private var words: [String] = []
    private var matches: [String] = []

    func set(_ words: [String]) {
        lock.lock()
        self.words = words
        lock.unlock()
    }

    /// The words starting with `prefix`; only verbs (upper case) at the start of the line.
    func match(_ prefix: String, lineStart: Bool) -> Int {
        lock.lock()
        defer { lock.unlock() }
        matches = words.filter { $0.lowercased().hasPrefix(prefix.lowercased()) }
        if lineStart { matches = matches.filter { $0 == $0.uppercased() } }
        return matches.count
    }

    func match(at index: Int) -> String? {
        lock.lock()
        defer { lock.unlock() }
        return index < matches.count ? matches[index] : nil
    }
}

/// The interactive shell: libedit line editing, persistent history, completion of verbs,
/// entities and attributes, a prompt that shows the pending changes, and a warning before
/// quitting with unsaved ones.
struct Shell {
    let connection: LineConnection
    let printer: Printer
    let options: CLIOptions
    /// The verbs and their clause words, from the protocol's verb table.
    static let verbs = Verb.allCases.map(\.rawValue)
        + Set(Verb.allCases.flatMap(\.facts.keywords)).filter { $0 == $0.uppercased() }.sorted()

    func run() -> Int32 {
        let history = (ProcessInfo.processInfo.environment["HOME"] ?? ".") + "/.records_history"
        using_history()
        read_history(history)
        clibedit_set_completer { text, start, _ in
            let prefix = text.map { String(cString: $0) } ?? ""
            guard Completions.shared.match(prefix, lineStart: start == 0) > 0 else { return nil }
            return rl_completion_matches(text) { _, state in
                Completions.shared.match(at: Int(state)).flatMap { strdup($0) }
            }
        }
        var entities: [String] = []
        if let reply = try? connection.send("ENTITIES"), reply.isOK {
            entities = reply.lines.compactMap { $0.split(separator: " ").first.map(String.init) }
        }
        var attributes: [String: [String]] = [:]
        connection.onPushed = { line in print("! " + line) }
        print(connection.banner.replacingOccurrences(of: "+OK ", with: ""))
        var pending = 0
        var warned = false
        // Ctrl-C drops the line being typed, or the output of the command running; never the shell.
        clibedit_catch_sigint()
        while true {
            Completions.shared.set(Self.verbs + entities + attributes.values.flatMap { $0 })
            let prompt = "\(options.user.map { $0 + "@" } ?? "")\(options.host) [\(pending)]> "
            let raw = readline(prompt)
            if clibedit_take_sigint() != 0 {
                if let raw { free(raw) }
                print("^C")
                continue
            }
            guard let raw else {
                if pending > 0 && !warned {
                    printer.note("\n\(pending) unsaved change(s) would be lost: SAVE them, or press Ctrl-D again to leave")
                    warned = true
                    continue
                }
                print("")
                break
            }
            let line = String(cString: raw).trimmingCharacters(in: .whitespaces)
            free(raw)
            if line.isEmpty { continue }
            // A line that may hold a password is never kept; the rest is written as you go.
            if Verb.of(line)?.facts.carriesSecret != true {
                add_history(line)
                write_history(history)
            }
            if line.uppercased() == "QUIT" || line.uppercased() == "EXIT" || line == "\\q" {
                if pending > 0 && !warned {
                    printer.note("\(pending) unsaved change(s) would be lost: SAVE them, or QUIT again to drop them")
                    warned = true
                    continue
                }
                _ = try? connection.send("QUIT")
                break
            }
            warned = false
            let started = Date()
            guard let reply = try? connection.send(line) else {
                printer.note("the connection to the server was lost")
                write_history(history)
                return 3
            }
            if clibedit_take_sigint() != 0 {
                // The server finished the command (the protocol has no cancel): only its output goes.
                printer.note("^C: output dropped; the command ran: \(reply.isOK ? "+OK " : "")\(reply.statusText)")
            } else {
                printer.reply(reply, elapsed: Date().timeIntervalSince(started))
            }
            pending = Self.pendingCount(after: line, reply, previous: pending)
            // Learn attribute names for completion from DESCRIBE-able entities mentioned.
            let words = line.split(separator: " ")
            if words.count > 1, let entity = entities.first(where: { $0.lowercased() == words[1].lowercased() }), attributes[entity] == nil,
               let described = try? connection.send("DESCRIBE \(entity)"), described.isOK {
                attributes[entity] = described.lines.dropFirst().compactMap { $0.split(separator: " ").first.map(String.init) }
                    .filter { !["attribute", "relationship"].contains($0) }
            }
        }
        write_history(history)
        return 0
    }

    /// The pending count a reply implies: "(3 pending)", "saved", "rolled back" ...
    static func pendingCount(after line: String, _ reply: WireReply, previous: Int) -> Int {
        let verb = line.split(separator: " ").first.map { $0.uppercased() } ?? ""
        if reply.isOK && (verb == "SAVE" || verb == "ROLLBACK") { return reply.statusText == "nothing to save" ? previous : 0 }
        // The server ends an edit's status with "(N pending)"; a #ref or a value earlier in
        // the line may hold the same words.
        if let range = reply.statusText.range(of: #"\((\d+) pending\)$"#, options: .regularExpression) {
            return Int(reply.statusText[range].dropFirst().split(separator: " ")[0]) ?? previous
        }
        if verb == "CHANGES" && reply.isOK { return Int(reply.statusText.split(separator: " ").first ?? "") ?? 0 }
        return previous
    }
}
