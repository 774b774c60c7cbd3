#if canImport(Glibc)
import Glibc
#endif
import CLibEdit
import Foundation
import RecordsClient
import RecordsProtocol
import RecordsClient

// records: the companion CLI of recordsd. Exit status: 0 success, 1 a command failed,
// 2 usage error, 3 could not connect or sign in.
signal(SIGPIPE, SIG_IGN)
if isatty(STDOUT_FILENO) == 1 { clibedit_line_buffered_stdout() } else { clibedit_block_buffered_stdout() }
// Character widths (tables) need a UTF-8 locale, whatever the environment's is.
if setlocale(LC_CTYPE, "") == nil || String(cString: nl_langinfo(nl_item(CODESET))) != "UTF-8" { _ = setlocale(LC_CTYPE, "C.UTF-8") }
let environment = ProcessInfo.processInfo.environment
let arguments = Array(CommandLine.arguments.dropFirst())
if arguments.contains("-h") || arguments.contains("--help") {
    print(CLIOptions.usage)
    exit(0)
}

let options: CLIOptions
do {
    options = try CLIOptions.parse(arguments, environment: environment, base: try CLIOptions.configured(environment: environment))
} catch {
    // One line, as other tools say it: the help is one flag away.
    FileHandle.standardError.write("records: \(error)\ntry `records --help`\n".data(using: .utf8)!)
    exit(2)
}
let printer = Printer(format: options.format, environment: environment)

let connector: Connector
let connection: LineConnection
do {
    var password: String?
    if let user = options.user {
        password = try options.password ?? passwordFromFile(environment["RECORDS_PASSWORD_FILE"]) ?? environment["RECORDS_PASSWORD"]
            ?? askPassword("password for \(user)@\(options.host): ")
    }
    connector = Connector(options: options, password: password, jsonReplies: printer.asksForJSON)
    connection = try connector.connect()
} catch {
    printer.note("records: \(error)")
    exit(3)
}

do {
    switch options.mode {
    case .shell:
        exit(Shell(connection: connection, connector: connector, printer: printer, options: options).run())
    case .command(let commands):
        // Repeating: Ctrl-C ends the repeats after the command running (once: it ends records).
        if options.repeatCount != 1 { clibedit_catch_sigint() }
        var round = 0
        repeat {
            if round > 0 && options.interval > 0 {
                // A Ctrl-C ends the wait early (nanosleep returns on the signal).
                var wait = timespec(tv_sec: Int(options.interval), tv_nsec: Int((options.interval - options.interval.rounded(.down)) * 1e9))
                _ = nanosleep(&wait, nil)
            }
            if clibedit_take_sigint() != 0 { break }
            for command in commands {
                let started = Date()
                let line = try FileValues.expand(command, on: connection, jsonReplies: printer.asksForJSON)
                let reply = try printer.stream(line, on: connection) { Date().timeIntervalSince(started) }
                // Refused for want of a sign-in: 3, as a failed connect or sign-in.
                guard reply.isOK else { exit(reply.code == .auth ? 3 : 1) }
            }
            round += 1
        } while options.repeatCount == 0 || round < options.repeatCount
        // The session ends here: changes not saved would be dropped without a word.
        let pending = Verb.of(commands.last ?? "") == .quit ? 0 : try Shell.pendingCount(on: connection)
        if pending > 0 {
            printer.note("records: \(pending) pending change(s) not saved: the session ends with the command; add -c SAVE")
            exit(1)
        }
        exit(0)
    case .script(let path):
        let data: Data
        if let path {
            guard let contents = FileManager.default.contents(atPath: path) else { throw UsageError(description: "cannot read \(path)") }
            data = contents
        } else {
            data = FileHandle.standardInput.readDataToEndOfFile()
        }
        guard var lines = Lines.split(data) else { throw UsageError(description: "\(path ?? "stdin") is not UTF-8 text") }
        if lines.last == "" { lines.removeLast() }
        exit(try ScriptRunner(connection: connection, printer: printer, keepGoing: options.keepGoing, jsonReplies: printer.asksForJSON)
            .run(lines: lines, name: path ?? "stdin"))
    case .export(let entity, let predicate):
        exit(try Bulk(connection: connection, printer: printer).export(entity: entity, predicate: predicate))
    case .importFile(let entity, let path):
        exit(try Bulk(connection: connection, printer: printer).importFile(entity: entity, path: path))
    case .watch(let entity, let predicate):
        exit(try Follow(connection: connection, printer: printer).run(entity: entity, predicate: predicate))
    case .codegen(let entities):
        print(try Codegen(connection: connection).swift(entities: entities), terminator: "")
        exit(0)
    }
} catch let error as UsageError {
    FileHandle.standardError.write("records: \(error)\n".data(using: .utf8)!)
    exit(2)
} catch {
    printer.note("records: \(error)")
    exit(3)
}

/// The first line of the file named by RECORDS_PASSWORD_FILE (a Docker secret, say).
func passwordFromFile(_ path: String?) throws -> String? {
    guard let path, !path.isEmpty else { return nil }
    guard let text = try? String(contentsOfFile: path, encoding: .utf8) else {
        throw ConnectError(description: "cannot read the password file \(path)")
    }
    return String(text.split(separator: "\n", omittingEmptySubsequences: false).first ?? "").trimmingCharacters(in: CharacterSet(charactersIn: "\r"))
}

/// A password from the terminal (`/dev/tty`, not stdin: a script piped in stays the script),
/// without echo.
func askPassword(_ prompt: String) throws -> String {
    let tty = open("/dev/tty", O_RDWR | O_CLOEXEC)
    guard tty >= 0 else {
        throw ConnectError(description: "no terminal to ask the password on: set RECORDS_PASSWORD_FILE (or RECORDS_PASSWORD)")
    }
    defer { close(tty) }
    _ = prompt.withCString { write(tty, $0, strlen($0)) }
    var original = termios()
    let terminal = tcgetattr(tty, &original) == 0
    if terminal {
        var silent = original
        silent.c_lflag &= ~tcflag_t(ECHO)
        tcsetattr(tty, TCSANOW, &silent)
    }
    defer {
        if terminal { tcsetattr(tty, TCSANOW, &original) }
        _ = write(tty, "\n", 1)
    }
    var line: [UInt8] = []
    var byte: UInt8 = 0
    while read(tty, &byte, 1) == 1, byte != 10 { line.append(byte) }
    if line.last == 13 { line.removeLast() }
    return String(decoding: line, as: UTF8.self)
}
