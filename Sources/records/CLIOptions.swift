import Foundation
import RecordsClient
import RecordsProtocol

struct UsageError: Error, CustomStringConvertible { var description: String }

/// What to do, parsed from the command line and RECORDS_URL.
struct CLIOptions {
    enum Format: String { case table, json, csv }
    enum Mode {
        case shell
        /// `-c` given once or more: run in order in one session.
        case command([String])
        case script(path: String?)
        case export(entity: String, predicate: String?)
        case importFile(entity: String, path: String)
        /// `records codegen swift [entity ...]`.
        case codegen(entities: [String])
        /// `records watch entity [--where predicate]`: follow the changes until Ctrl-C.
        case watch(entity: String, predicate: String?)
    }

    var host = "localhost"
    var port = 7878
    var user: String?
    /// From a URL (`records://alice:secret@host`), when it holds one.
    var password: String?
    var format: Format?
    var mode = Mode.shell
    var keepGoing = false
    var tls = RecordsURL.TLSMode.off
    /// CA certificates to trust (PEM); else the system's.
    var tlsCA: String?
    /// Seconds to wait for the connection (an unreachable host otherwise waits for the system).
    var connectTimeout: Double? = 10
    /// json and csv ask the server for JSON replies (FORMAT JSON), again after each sign-in.

    /// `-c` commands run this many times, `interval` seconds apart (redis-cli's -r and -i).
    var repeatCount = 1
    var interval = 0.0

    static let usage = """
        usage: records [options]                         interactive shell
               records [options] -c 'COMMAND' [-c ...]   run commands in one session (stops at a failure)
               records --version
               records [options] records://user@host:port ...   (also --url URL, RECORDS_URL)
               records [options] -f script.rec           run a script (also: records < script.rec)
               records [options] export ENTITY [--where PREDICATE] > file.csv
               records [options] import ENTITY file.csv
               records [options] codegen swift [ENTITY ...] > Models.swift   RecordsClient structs
               records [options] watch ENTITY [--where PREDICATE]   follow changes until Ctrl-C
               records completion bash|zsh|fish          a completion script for the shell

        options:
          -H, --host HOST        server host (default localhost)
          -p, --port PORT        server port (default 7878)
          -u, --user NAME        sign in as NAME; the password is asked on the terminal
                                 without echo (or read from the file RECORDS_PASSWORD_FILE,
                                 or taken from RECORDS_PASSWORD)
          --tls                  switch to TLS after connecting (STARTTLS), checking the
                                 server's certificate and name
          --tls-direct           TLS from the first byte (the server's --tls-listen port)
          --tls-ca FILE          trust these CA certificates (RECORDS_TLS_CA; default: the system's)
          --connect-timeout S    give up connecting after S seconds (default 10; 0: the system's)
          --format FORMAT        table (default on a terminal), json (one object a line) or csv;
                                 json and csv ask the server for JSON replies (DESCRIBE, INFO ...)
          --repeat N             run the -c commands N times (0: until Ctrl-C)
          --interval S           seconds between repeats (default 0)
          --continue             in scripts, go on after a failed command
          -h, --help             this help

        Defaults come from ~/.config/records/config ($XDG_CONFIG_HOME), lines of `key = value`:
        url, host, port, user, tls (off, starttls, direct), tls-ca, format, connect-timeout.
        RECORDS_URL=records://user@host:port sets host, port and user at once;
        recordss://... is TLS from the first byte, records://...?tls=require is STARTTLS.
        exit status: 0 success, 1 a command failed, 2 usage error, 3 could not connect or sign in

        examples:
          records -c 'FIND employee WHERE age > 30 ORDER BY last_name LIMIT 10'
          records --format csv -c 'FIND department' > departments.csv
          records -u alice -H db.example.com
          records export employee --where 'department.name == "Sales"' > sales.csv
          records import employee sales.csv
        """

    /// The CLI's version: the server's protocol version it was built with.
    static let version = "0.1.0"

    /// A URL (RecordsClient's one parser of them) over the defaults.
    mutating func apply(url: String, from source: String) throws {
        let parsed: RecordsURL
        do {
            parsed = try RecordsURL(url)
        } catch {
            guard case .invalidRequest(let reason) = error else { throw error }
            throw UsageError(description: "\(source): \(reason)")
        }
        if let host = parsed.host { self.host = host }
        if let port = parsed.port { self.port = port }
        if let user = parsed.user {
            self.user = user
            password = parsed.password  // a URL's password is the user's (else asked, or from the environment)
        }
        if parsed.tls != .off { tls = parsed.tls }
    }

    /// The config file's settings as options, under the environment's and the arguments'.
    static func configured(environment: [String: String]) throws -> CLIOptions {
        let base = environment["XDG_CONFIG_HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? ((environment["HOME"] ?? ".") + "/.config")
        let path = base + "/records/config"
        guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { return CLIOptions() }
        var arguments: [String] = []
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            var line = raw.trimmingCharacters(in: .whitespaces)
            if line.isEmpty || line.hasPrefix("#") { continue }
            // `port = 7878  # a comment`: a # after white space starts a comment.
            if let comment = line.range(of: #"\s#"#, options: .regularExpression) { line = line[..<comment.lowerBound].trimmingCharacters(in: .whitespaces) }
            guard let equals = line.firstIndex(of: "=") else { throw UsageError(description: "\(path) line \(number + 1): expected key = value") }
            let key = line[..<equals].trimmingCharacters(in: .whitespaces), value = line[line.index(after: equals)...].trimmingCharacters(in: .whitespaces)
            switch (key, value) {
            case ("tls", "off"): break
            case ("tls", "starttls"): arguments.append("--tls")
            case ("tls", "direct"): arguments.append("--tls-direct")
            case ("url", _), ("host", _), ("port", _), ("user", _), ("tls-ca", _), ("format", _), ("connect-timeout", _):
                arguments += ["--" + key, value]
            default: throw UsageError(description: "\(path) line \(number + 1): unknown setting '\(key) = \(value)'")
            }
        }
        do {
            return try parse(arguments, environment: [:], base: CLIOptions(), modes: false)
        } catch let error as UsageError {
            throw UsageError(description: "\(path): \(error.description)")
        }
    }

    static func parse(_ given: [String], environment: [String: String], base: CLIOptions = CLIOptions(), modes: Bool = true) throws -> CLIOptions {
        var arguments = given
        var options = base
        if let url = environment["RECORDS_URL"], !url.isEmpty { try options.apply(url: url, from: "RECORDS_URL") }
        if let ca = environment["RECORDS_TLS_CA"], !ca.isEmpty { options.tlsCA = ca }
        var rest: [String] = []
        var index = 0
        var script: String?
        var commands: [String] = []
        var predicate: String?
        func value(_ flag: String) throws -> String {
            guard index < arguments.count else { throw UsageError(description: "\(flag) needs a value") }
            index += 1
            return arguments[index - 1]
        }
        while index < arguments.count {
            var argument = arguments[index]
            index += 1
            // `--port=7841`: the value after `=` is the next argument.
            if argument.hasPrefix("--"), let equals = argument.firstIndex(of: "=") {
                let value = String(argument[argument.index(after: equals)...])
                argument = String(argument[..<equals])
                arguments.insert(value, at: index)
            }
            switch argument {
            case "--url": try options.apply(url: try value(argument), from: "--url")
            case let url where url.hasPrefix("records://") || url.hasPrefix("recordss://"):
                try options.apply(url: url, from: "the URL")
            case "--version":
                print("records \(Self.version)")
                exit(0)
            case "-H", "--host": options.host = try value(argument)
            case "-p", "--port":
                let text = try value(argument)
                guard let port = Int(text), (1...65535).contains(port) else { throw UsageError(description: "--port takes a number from 1 to 65535, not '\(text)'") }
                options.port = port
            case "-u", "--user": options.user = try value(argument)
            case "-c", "--command":
                let command = try value(argument)
                guard !command.contains(where: { $0 == "\n" || $0 == "\r" || $0 == "\r\n" }) else {
                    throw UsageError(description: "-c takes one line; give each command its own -c (or use a script)")
                }
                guard Verb.of(command) != .import else {
                    throw UsageError(description: "IMPORT reads CSV lines after it: use `records import ENTITY FILE.csv`, or a script with its data and a '.' line")
                }
                commands.append(command)
            case "-f", "--file": script = try value(argument)
            case "--where": predicate = try value(argument)
            case "--continue": options.keepGoing = true
            case "--tls": options.tls = .startTLS
            case "--tls-direct": options.tls = .direct
            case "--tls-ca":
                options.tlsCA = try value(argument)
                if options.tls == .off { options.tls = .startTLS }
            case "--connect-timeout":
                let text = try value(argument)
                guard let seconds = Double(text), seconds >= 0, seconds <= 86400 else { throw UsageError(description: "--connect-timeout takes seconds, not '\(text)'") }
                options.connectTimeout = seconds == 0 ? nil : seconds
            case "--repeat":
                let text = try value(argument)
                guard let count = Int(text), count >= 0 else { throw UsageError(description: "--repeat takes a count, not '\(text)'") }
                options.repeatCount = count
            case "--interval":
                let text = try value(argument)
                guard let seconds = Double(text), seconds >= 0, seconds <= 86400 else { throw UsageError(description: "--interval takes seconds, not '\(text)'") }
                options.interval = seconds
            case "--format":
                let text = try value(argument)
                guard let format = Format(rawValue: text) else { throw UsageError(description: "--format takes table, json or csv, not '\(text)'") }
                options.format = format
            default:
                if argument.hasPrefix("-") && argument.count > 1 { throw UsageError(description: "unknown option \(argument)") }
                rest.append(argument)
            }
        }
        guard modes else { return options }
        if let mode = try mode(rest, commands: commands, script: script, predicate: predicate) { options.mode = mode }
        return options
    }

    /// What the words after the flags ask for (`watch ENTITY`, `export ENTITY`, ...), else the
    /// commands or script given, else a script on stdin when it is not a terminal; nil: the shell.
    private static func mode(_ rest: [String], commands: [String], script: String?, predicate: String?) throws -> Mode? {
        switch (rest.first, rest.count) {
        case ("watch"?, 2): return .watch(entity: rest[1], predicate: predicate)
        case ("completion"?, 2):
            guard let script = Completion.script(for: rest[1]) else { throw UsageError(description: "completion takes bash, zsh or fish, not '\(rest[1])'") }
            print(script, terminator: "")
            exit(0)
        case ("export"?, 2): return .export(entity: rest[1], predicate: predicate)
        case ("import"?, 3): return .importFile(entity: rest[1], path: rest[2])
        case ("codegen"?, _) where rest.count >= 2 && rest[1] == "swift": return .codegen(entities: Array(rest.dropFirst(2)))
        case (nil, _):
            if !commands.isEmpty { return .command(commands) }
            if let script { return .script(path: script) }
            return isatty(STDIN_FILENO) == 0 ? .script(path: nil) : nil
        default: throw UsageError(description: "unexpected '\(rest.joined(separator: " "))'")
        }
    }
}
