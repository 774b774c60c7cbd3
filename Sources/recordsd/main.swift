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
        let host = admin.host == "0.0.0.0" || admin.host == "*" ? "127.0.0.1" : admin.host == "::" ? "::1" : admin.host
        let answer = AdminServer.probe(host: host, port: admin.port, path: "/ready")
        print(answer ?? "no answer from \(host):\(admin.port)")
        exit(answer?.hasPrefix("HTTP/1.1 200") == true ? 0 : 1)
    case let args where args.first == "user":
        try UserCommandLine(options: options, arguments: Array(args.dropFirst())).run(environment: environment)
    default:
        throw UsageError(description: "unknown command '\(arguments.joined(separator: " "))'")
    }
    exit(0)
} catch let error as UsageError {
    FileHandle.standardError.write("recordsd: \(error)\n\n\(Options.usage)\n".data(using: .utf8)!)
    exit(2)
} catch {
    Log.error("\(error)")
    exit(1)
}
