import CLibEdit
import Foundation
import RecordsClient
import RecordsProtocol

/// What tab completion knows, set before each line is read: the entities, and a way to learn
/// one's attributes and relationships (asked of the server the first time, then kept).
/// libedit calls back into C without a context pointer, so they live here.
private final class Completions: @unchecked Sendable {  // everything guarded by `lock`; used on the shell's thread
    static let shared = Completions()
    private let lock = NSLock()
    private var completion = TabCompletion(entities: [])
    private var shape: (String) -> TabCompletion.EntityShape? = { _ in nil }
    private var matches: [String] = []

    func set(entities: [String], shape: @escaping (String) -> TabCompletion.EntityShape?) {
        lock.withLock {
            completion = TabCompletion(entities: entities)
            self.shape = shape
        }
    }

    /// The candidates for `word` typed after `before`, by position (`TabCompletion`).
    func match(before: String, word: String) -> Int {
        let (completion, shape) = lock.withLock { (self.completion, self.shape) }
        let found = completion.candidates(before: before, word: word, shape: shape)
        lock.withLock { matches = found }
        return found.count
    }

    func match(at index: Int) -> String? {
        lock.withLock { index < matches.count ? matches[index] : nil }
    }
}

/// The line libedit's callback interface handed over (it calls back without a context).
private final class TypedLine: @unchecked Sendable {  // `line`, `done` guarded by `lock`
    static let shared = TypedLine()
    private let lock = NSLock()
    private var line: String?
    private var done = false

    func deliver(_ text: String?) {
        lock.withLock {
            line = text
            done = true
        }
    }

    /// nil until a line (or Ctrl-D, `.some(nil)`) came.
    func take() -> String?? {
        lock.withLock {
            guard done else { return nil }
            done = false
            defer { line = nil }
            return .some(line)
        }
    }
}

/// What reading a line at the prompt ended with.
enum Typed {
    case line(String)
    case endOfInput
    case interrupted
    case connectionLost
}

/// The interactive shell: libedit line editing, persistent history, completion of verbs,
/// entities and attributes, a prompt that shows the pending changes, and a warning before
/// quitting with unsaved ones.
final class Shell {
    private var connection: LineConnection
    /// Connects again, the same way, when the server went away (a restart).
    let connector: Connector
    let printer: Printer
    let options: CLIOptions

    /// The token of the server's last handoff notice: the next reconnect RESUMEs with it.
    private var handOffToken: String?
    /// The server said it is stopping: a line it did not answer did not run.
    private var serverStopped = false

    init(connection: LineConnection, connector: Connector, printer: Printer, options: CLIOptions) {
        self.connection = connection
        self.connector = connector
        self.printer = printer
        self.options = options
    }
    /// The verbs and their clause words, from the protocol's verb table.
    static let verbs = Verb.allCases.map(\.rawValue)
        + Set(Verb.allCases.flatMap(\.facts.keywords)).filter { $0 == $0.uppercased() }.sorted()

    /// What the prompt holds between lines: the unit's pending count, whether leaving with it
    /// was warned of, and the names completion offers.
    private var pending = 0
    private var warned = false
    /// `\semicolon on`: a command ends at `;`, as in psql, not at the end of a line.
    private var semicolons = false
    private var entities: [String] = []
    private var shapes: [String: TabCompletion.EntityShape] = [:]
    private let history = (ProcessInfo.processInfo.environment["HOME"] ?? ".") + "/.records_history"

    /// What a step of the loop leaves it to do.
    private enum Next { case prompt, leave(Int32) }

    func run() -> Int32 {
        startLineEditing()
        entities = listEntities()
        follow(connection)
        print(connection.banner.replacingOccurrences(of: "+OK ", with: ""))
        // Ctrl-C drops the line being typed, or the output of the command running; never the shell.
        clibedit_catch_sigint()
        var status: Int32 = 0
        loop: while true {
            Completions.shared.set(entities: entities) { [unowned self] (entity: String) in shape(of: entity) }
            let prompt = "\(options.user.map { $0 + "@" } ?? "")\(options.host) [\(pending)]> "
            switch readLine(prompt) {
            case .interrupted:
                print("^C")
            case .connectionLost:
                guard let how = reconnect(pending: pending, during: nil) else {
                    status = 3
                    break loop
                }
                if how != .waiting { pending = (try? Self.pendingCount(on: connection)) ?? 0 }
            case .endOfInput:
                if pending > 0 && !warned {
                    printer.note("\n\(pending) unsaved change(s) would be lost: SAVE them, or press Ctrl-D again to leave")
                    warned = true
                    continue
                }
                print("")
                break loop
            case .line(let text):
                guard let line = continued(text), !line.isEmpty else { continue }
                let commands = semicolons && !Self.takenAtOnce(line) ? Lines.statements(line).ended : [line]
                for command in commands {
                    if case .leave(let code) = take(command) {
                        status = code
                        break loop
                    }
                }
            }
        }
        write_history(history)
        return status
    }

    /// libedit: the history file read, and completion from `Completions`.
    private func startLineEditing() {
        using_history()
        read_history(history)
        clibedit_set_completer { text, start, _ in
            let word = text.map { String(cString: $0) } ?? ""
            let line = Array(String(cString: clibedit_line_buffer()).utf8)
            let before = String(decoding: line.prefix(max(0, Int(start))), as: UTF8.self)
            guard Completions.shared.match(before: before, word: word) > 0 else { return nil }
            return rl_completion_matches(text) { _, state in
                Completions.shared.match(at: Int(state)).flatMap { strdup($0) }
            }
        }
    }

    /// The entities' names for completion: text (`employee 5 2`) or, under FORMAT JSON,
    /// objects with a name.
    private func listEntities() -> [String] {
        guard let reply = try? connection.send("ENTITIES"), reply.isOK else { return [] }
        return reply.lines.compactMap { line in
            guard line.hasPrefix("{") else { return line.split(separator: " ").first.map(String.init) }
            guard case .string(let name)? = JSONObject.parse(line).first(where: { $0.key == "name" })?.value else { return nil }
            return name
        }
    }

    /// The line typed, with the lines a trailing `\` continued it on (the protocol's line is
    /// one line), trimmed; nil when Ctrl-C or Ctrl-D abandoned a continuation.
    /// A quote or a parenthesis left open reads on too, as psql does: a line break inside a
    /// string is the string's (`\n`, the protocol's line being one line), elsewhere a space.
    /// With `\semicolon on`, it reads on until a `;` outside quotes ends it.
    private func continued(_ text: String) -> String? {
        var joined = text
        while true {
            let open = Lines.open(joined)
            let backslash = joined.hasSuffix("\\") && open.quote == nil
            let unended = semicolons && !Self.takenAtOnce(joined)
                && !Lines.statements(joined).rest.trimmingCharacters(in: .whitespaces).isEmpty
            guard backslash || open.quote != nil || open.depth > 0 || unended else { break }
            guard case .line(let more) = readLine("... ") else { return nil }
            joined = backslash ? String(joined.dropLast()) + more : joined + (open.quote != nil ? "\\n" : " ") + more
        }
        return joined.trimmingCharacters(in: .whitespaces)
    }

    /// One typed line: kept in the history unless it may hold a password, then QUIT, a
    /// backslash command of the shell's own, or a request for the server.
    private func take(_ line: String) -> Next {
        if Verb.of(line)?.facts.carriesSecret != true {
            add_history(line)
            write_history(history)
        }
        if line.uppercased() == "QUIT" || line.uppercased() == "EXIT" || line == "\\q" {
            if pending > 0 && !warned {
                printer.note("\(pending) unsaved change(s) would be lost: SAVE them, or QUIT again to drop them")
                warned = true
                return .prompt
            }
            _ = try? connection.send("QUIT")
            return .leave(0)
        }
        warned = false
        if line == "\\x" || line.hasPrefix("\\x ") {
            expandedDisplay(line.dropFirst(2).trimmingCharacters(in: .whitespaces))
            return .prompt
        }
        if line.hasPrefix("\\import") { return importFile(line) }
        if line == "\\semicolon" || line.hasPrefix("\\semicolon ") {
            semicolonMode(line.dropFirst(10).trimmingCharacters(in: .whitespaces))
            return .prompt
        }
        if line == "\\?" || line == "\\h" {
            printer.note(Self.shellCommands)
            return .prompt
        }
        if line.hasPrefix("\\") {
            printer.note("unknown shell command \(line.prefix { $0 != " " }): \\? lists them (HELP lists the server's verbs)")
            return .prompt
        }
        return request(line)
    }

    /// `\?`: the shell's own commands, as psql lists its backslash commands.
    static let shellCommands: String = [
        ("\\?", "the shell's own commands (HELP lists the server's verbs)"),
        ("\\x [on|off|auto]", "expanded display: one block a record (auto: when a table is too wide)"),
        ("\\import ENTITY FILE.csv", "load a CSV file, with a progress bar"),
        ("\\semicolon [on|off]", "on: a command ends at ;, as in psql (several on a line, one over several lines)"),
        ("\\q, QUIT, EXIT", "leave (asks first when changes are not saved)"),
        ("Ctrl-C", "drop the line being typed, or cancel the running command on the server"),
        ("Ctrl-D", "leave, as QUIT"),
        ("a line ending in \\", "continues on the next"),
    ].map { command, what in command.padding(toLength: 25, withPad: " ", startingAt: 0) + what }.joined(separator: "\n")

    /// psql's caret: under the column where a SYNTAX error says parsing stopped (`at N:`, the
    /// protocol's column, counted in characters from 1).
    private func showCaret(_ reply: WireReply, under line: String) {
        guard reply.code == .syntax, reply.message.hasPrefix("at "), !line.contains("\n"),
              let column = Int(reply.message.dropFirst(3).prefix { $0.isNumber }), column >= 1, column <= line.count + 1 else { return }
        printer.note("  " + line)
        printer.note("  " + String(repeating: " ", count: Printer.displayWidth(String(line.prefix(column - 1)))) + "^")
    }

    /// Lines that are never held for a `;`: the shell's own commands and leaving, as psql
    /// takes its backslash commands at once.
    private static func takenAtOnce(_ line: String) -> Bool {
        let trimmed = line.trimmingCharacters(in: .whitespaces)
        return trimmed.hasPrefix("\\") || ["QUIT", "EXIT"].contains(trimmed.uppercased())
    }

    /// `\semicolon [on|off]`: whether a command ends at `;` or at the end of its line.
    private func semicolonMode(_ word: String) {
        switch word.lowercased() {
        case "": semicolons.toggle()
        case "on": semicolons = true
        case "off": semicolons = false
        default:
            printer.note("usage: \\semicolon [on|off]")
            return
        }
        printer.note(semicolons ? "a command ends at ; (several on a line, or one over several lines)" : "a command ends at the end of its line")
    }

    /// `\x [on|off|auto]`: psql's expanded display.
    private func expandedDisplay(_ word: String) {
        if word.isEmpty {
            printer.expanded = printer.expanded == .on ? .off : .on
        } else if let mode = Printer.Expanded(rawValue: word.lowercased()) {
            printer.expanded = mode
        } else {
            printer.note("usage: \\x [on|off|auto]")
            return
        }
        printer.note("expanded display is \(printer.expanded.rawValue)")
    }

    /// `\import entity FILE`: a CSV file, streamed with a progress bar.
    private func importFile(_ line: String) -> Next {
        let words = line.split(separator: " ").map(String.init)
        guard words.count == 3 else {
            printer.note("usage: \\import ENTITY FILE.csv")
            return .prompt
        }
        do {
            _ = try Bulk(connection: connection, printer: printer).importFile(entity: words[1], path: words[2])
        } catch let error as UsageError {
            printer.note(error.description)
        } catch {
            guard let how = reconnect(pending: pending, during: line) else { return .leave(3) }
            if how != .waiting { pending = (try? Self.pendingCount(on: connection)) ?? 0 }
        }
        return .prompt
    }

    /// A line for the server (IMPORT's data read after it), sent, followed to another
    /// server when its own went away, and its reply printed.
    private func request(_ line: String) -> Next {
        var request = line
        do {
            request = try FileValues.expand(line, on: connection, jsonReplies: printer.asksForJSON)
        } catch let error as UsageError {
            printer.note(error.description)
            return .prompt
        } catch {
            guard reconnect(pending: pending, during: line) != nil else { return .leave(3) }
            return .prompt
        }
        // IMPORT's data is typed (or pasted) after it, until a line holding only `.`.
        if Verb.of(line) == .import {
            guard let data = readData() else {
                printer.note("IMPORT not sent")
                return .prompt
            }
            // As typed: a line starting with `.` gets the protocol's one more `.` in front.
            request += "\n" + data.map(CSVRecords.stuffed).joined(separator: "\n") + "\n."
        }
        let started = Date()
        connector.interrupt.ctrlC = { clibedit_peek_sigint() != 0 }
        connector.interrupt.armed = true
        defer { connector.interrupt.armed = false }
        var answered = try? connection.send(request)
        if answered == nil {
            guard let how = reconnect(pending: pending, during: line) else { return .leave(3) }
            // Resumed after the server stopped: the line got no reply, so it never ran (a
            // stopping server reads nothing after its notices); it runs now. After a crash
            // it may have run: that is said instead.
            switch how {
            case .resumed(rerun: true): answered = try? connection.send(request)
            case .resumed(rerun: false): printer.note("`\(line.prefix(60))` got no reply and may or may not have run: CHANGES shows the unit")
            case .waiting: printer.note("`\(line.prefix(60))` got no reply\(serverStopped ? " and did not run" : " and may or may not have run")")
            case .fresh: break
            }
        }
        guard let reply = answered else {
            pending = (try? Self.pendingCount(on: connection)) ?? (handOffToken == nil ? 0 : pending)
            return .prompt
        }
        if clibedit_take_sigint() != 0 {
            // The server was asked to cancel the command (CANCEL): it stopped, or had ended.
            printer.note(reply.code == .cancelled ? "^C: cancelled on the server; the unit of work is as it was"
                         : "^C: output dropped; the command had ended: \(reply.isOK ? "+OK " : "")\(reply.statusText)")
        } else {
            printer.reply(reply, elapsed: Date().timeIntervalSince(started), verb: Verb.of(line))
            showCaret(reply, under: request)
        }
        // `--format json|csv`: FORMAT is refused before sign-in, so asked again after it.
        if reply.isOK && Verb.of(line) == .auth && printer.asksForJSON { _ = try? connection.send("FORMAT JSON") }
        pending = (try? Self.pendingCount(on: connection)) ?? pending
        return .prompt
    }

    /// An entity's attributes and relationships for completion, from DESCRIBE as JSON (once
    /// each; asked while a Tab waits, the connection idle at the prompt).
    private func shape(of entity: String) -> TabCompletion.EntityShape? {
        if let known = shapes[entity] { return known }
        guard let described = (try? Described.ask(entity, on: connection, jsonReplies: printer.asksForJSON)) ?? nil else { return nil }
        let shape = TabCompletion.EntityShape(attributes: described.attributes.map(\.name), relationships: described.relationships)
        shapes[entity] = shape
        return shape
    }

    /// Prints what `connection` pushes, as `shown(pushed:)` says.
    private func follow(_ connection: LineConnection) {
        connection.onPushed = { [unowned self] line in if let shown = self.shown(pushed: line) { print(shown) } }
    }

    /// How a lost connection was replaced.
    enum Reconnected: Equatable { case fresh, resumed(rerun: Bool), waiting }

    /// A pushed line as printed, nil when it is not: a handoff notice is kept (the reconnect
    /// that follows resumes with it and says so in one line), and the shutdown after it is
    /// said by that line too.
    private func shown(pushed line: String) -> String? {
        if let token = LineConnection.handOffToken(line) {
            handOffToken = token
            return nil
        }
        // The copy the token names is older than what the server answered since: never resumed.
        if Notice.revokesHandOff(line) { handOffToken = nil }
        if line.hasPrefix(Notice.shutdown(lost: nil).kind + " ") {
            serverStopped = true
            if handOffToken != nil { return nil }
        }
        return "! " + line
    }

    /// The server went away (a restart, say): connect again the same way, a few times over
    /// some seconds. After a handoff notice the session is RESUMEd and one line says so;
    /// otherwise it says what was lost with the old session. Nil when the server stays away.
    private func reconnect(pending: Int, during command: String?) -> Reconnected? {
        // What arrived unread (a write that failed read nothing) may hold the handoff notice.
        for line in (try? connection.takeArrivedPushes()) ?? [] {
            if let shown = shown(pushed: line) { print(shown) }
        }
        if handOffToken == nil {
            var lost = "the connection to the server was lost"
            if let command { lost += " during `\(command.prefix(60))`, which may or may not have run" }
            if pending > 0 { lost += "; its \(pending) pending change(s) went with the session" }
            printer.note(lost + "; reconnecting...")
        }
        for attempt in 0..<40 {
            if attempt > 0 { usleep(250_000) }
            if clibedit_take_sigint() != 0 { break }
            guard let fresh = try? connector.connect() else { continue }
            connection = fresh
            follow(connection)
            guard let token = handOffToken else {
                printer.note("reconnected to \(options.host):\(options.port): a new session, with no pending changes and no WATCH")
                return .fresh
            }
            // The token is kept until a server answers its RESUME: UNAVAILABLE (PostgreSQL
            // away, the old server's lock not yet released) is asked again.
            guard let resumed = try? fresh.send("RESUME " + token), resumed.code != .unavailable else { continue }
            let stopped = serverStopped
            handOffToken = nil
            serverStopped = false
            guard resumed.isOK else {
                printer.note("the server restarted and this session could not be resumed (\(resumed.statusText)): a new session, with no pending changes and no WATCH")
                return .fresh
            }
            for line in resumed.lines { printer.note(line) }
            printer.note(resumed.message)
            return .resumed(rerun: stopped)
        }
        if handOffToken != nil {
            // The servers keep a handed-off session for --resume-ttl: the shell stays, and its
            // next line tries again, rather than ending and leaving the unit behind.
            printer.note("no server at \(options.host):\(options.port) took this session back yet; its pending changes wait there: the next line tries again")
            return .waiting
        }
        printer.note("could not reconnect to \(options.host):\(options.port)")
        return nil
    }

    /// A line typed at the prompt, while events pushed by the server (WATCH) are printed above
    /// it as they arrive: libedit's callback interface, fed when stdin is readable, and the
    /// socket watched beside it.
    private func readLine(_ prompt: String) -> Typed {
        _ = TypedLine.shared.take()
        rl_callback_handler_install(prompt) { raw in
            TypedLine.shared.deliver(raw.map { String(cString: $0) })
            if let raw { free(raw) }
        }
        defer { rl_callback_handler_remove() }
        while true {
            if connection.hasBufferedInput || Self.readable(connection.fileDescriptor) {
                guard let pushed = try? connection.takeArrivedPushes() else {
                    print("")
                    return .connectionLost
                }
                let lines = pushed.compactMap(shown(pushed:))
                if !lines.isEmpty {
                    // Above the line being typed, which is then drawn again as it was.
                    print("\r\u{1B}[K" + lines.joined(separator: "\n"))
                    rl_forced_update_display()
                }
            }
            var entries = [pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0),
                           pollfd(fd: connection.fileDescriptor, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&entries, 2, -1)
            if clibedit_take_sigint() != 0 {
                rl_replace_line("", 0)
                return .interrupted
            }
            guard ready > 0, entries[0].revents != 0 else { continue }
            rl_callback_read_char()
            if let line = TypedLine.shared.take() { return line.map(Typed.line) ?? .endOfInput }
        }
    }

    private static func readable(_ fd: Int32) -> Bool {
        var entry = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) > 0
    }

    /// IMPORT's data lines, as typed, until `.`; nil when Ctrl-C or Ctrl-D abandons them.
    private func readData() -> [String]? {
        var lines: [String] = []
        while true {
            let raw = readline("... ")
            if clibedit_take_sigint() != 0 {
                if let raw { free(raw) }
                return nil
            }
            guard let raw else { return nil }
            let text = String(cString: raw)
            free(raw)
            if text == "." { return lines }
            lines.append(text)
        }
    }

    /// The pending count as the server keeps it (`CHANGES COUNT`'s JSON line), never read
    /// from a reply's text; 0 for a session that cannot hold changes (not signed in, a reader).
    static func pendingCount(on connection: LineConnection) throws -> Int {
        let reply = try connection.send("CHANGES COUNT")
        guard reply.isOK, let line = reply.lines.first,
              case .raw(let number)? = JSONObject.parse(line).first(where: { $0.key == "pending" })?.value else { return 0 }
        return Int(number) ?? 0
    }
}
