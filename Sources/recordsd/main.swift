#if canImport(Glibc)
import Glibc
#endif
import CSystem
import Foundation
import Records
import RecordsServer

Signals.block()
raiseFileLimit()
csystem_line_buffered_stdout()

let environment: [String: String]
do {
    environment = try Options.withFiles(ProcessInfo.processInfo.environment)
} catch {
    FileHandle.standardError.write("recordsd: \(error)\n".data(using: .utf8)!)
    exit(2)
}
var arguments = Array(CommandLine.arguments.dropFirst())

if arguments.contains("--help") || arguments.contains("-h") || arguments.first == "help" {
    print(Options.usage)
    exit(0)
}
if arguments.contains("--version") {
    print("recordsd \(ServerContext.version)")
    exit(0)
}

// Known before the options are read: a usage error under --log-format json is JSON too.
if environment["RECORDSD_LOG_FORMAT"]?.lowercased() == "json" || arguments.contains("--log-format=json")
    || zip(arguments, arguments.dropFirst()).contains(where: { $0 == "--log-format" && $1.lowercased() == "json" }) {
    Log.json = true
}

do {
    var options = Options()
    try options.parse(&arguments, environment: environment)
    Log.level = options.logLevel
    Log.json = options.logJSON
    switch arguments {
    case [], ["serve"]:
        try ServeCommand(options: options).run(environment: environment)
    case ["migrate"]:
        try MigrateCommand(options: options, statusOnly: false).run(environment: environment)
    case ["migrate", "status"]:
        try MigrateCommand(options: options, statusOnly: true).run(environment: environment)
    case ["health"]:
        // A container's health check: the admin listener's /ready, exit 0 when ready.
        guard let admin = options.adminListen else { throw UsageError(description: "health needs --admin-listen or RECORDSD_ADMIN_LISTEN") }
        let host = SessionsCommand.reachable(admin.host)
        let answer = AdminServer.probe(host: host, port: admin.port, path: "/ready")
        print(answer ?? "no answer from \(host):\(admin.port)")
        exit(answer?.hasPrefix("HTTP/1.1 200") == true ? 0 : 1)
    case let args where args.first == "sessions":
        try SessionsCommand(options: options, arguments: Array(args.dropFirst())).run()
    case ["uninstall"]:
        try UninstallCommand(options: options).run(environment: environment)
    case let args where args.first == "user":
        try UserCommandLine(options: options, arguments: Array(args.dropFirst())).run(environment: environment)
    default:
        throw UsageError(description: "unknown command '\(arguments.joined(separator: " "))'")
    }
    exit(0)
} catch let error as UsageError {
    // One line and where to look, as usage errors go: the whole usage hid the line that mattered.
    if Log.json {
        Log.error("\(error); try `recordsd --help`")
    } else {
        FileHandle.standardError.write("recordsd: \(error)\ntry `recordsd --help`\n".data(using: .utf8)!)
    }
    exit(2)
} catch {
    Log.error("\(error)")
    exit(1)
}
