import Foundation
import Testing

/// Status line and body of `GET path` on an admin listener (`--admin-listen`).
func adminGet(_ port: Int, _ path: String) throws -> (status: String, body: [String]) {
    let http = try LineClient(port: port, readBanner: false)
    try http.write("GET \(path) HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    let lines = try http.readToEnd().map { $0.hasSuffix("\r") ? String($0.dropLast()) : $0 }
    let blank = lines.firstIndex(of: "") ?? lines.count
    return (lines.first ?? "", Array(lines.dropFirst(blank + 1)))
}

extension TestServer {
    /// The port of the admin listener the server logged (started with `--admin-listen 127.0.0.1:0`).
    func adminPort() throws -> Int {
        let line = try #require(log.split(separator: "\n").first { $0.contains("admin endpoints on ") })
        return try #require(Int(line.split(separator: " ").first { $0.hasPrefix("127.0.0.1:") }?.split(separator: ":").last ?? ""))
    }

    /// One sample of `GET /metrics`, by its name and labels as printed (0 when absent).
    func metric(_ sample: String) throws -> Double {
        let body = try adminGet(try adminPort(), "/metrics").body
        return body.first { $0.hasPrefix(sample + " ") }.flatMap { Double($0.split(separator: " ").last ?? "") } ?? 0
    }
}
