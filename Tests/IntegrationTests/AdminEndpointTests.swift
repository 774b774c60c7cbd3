import Foundation
import Postgres
import Testing

/// `--admin-listen`: /live, /ready and /metrics as an operator's tools read them.
@Suite struct AdminEndpointTests {
    @Test func liveReadyAndMetricsThatMove() throws {
        let (proxy, through, _) = try CutProxy.toFreshDatabase()
        let server = try TestServer(databaseURL: through, arguments: ["--admin-listen", "127.0.0.1:0"])
        let admin = try server.adminPort()
        #expect(try adminGet(admin, "/live").status == "HTTP/1.1 200 OK")
        #expect(try adminGet(admin, "/ready").status == "HTTP/1.1 200 OK")
        #expect(try adminGet(admin, "/nothing").status == "HTTP/1.1 404 Not Found")
        // Known commands move the counters by known amounts.
        let client = try server.client()
        for _ in 0..<3 { try client.ok("PING") }
        #expect(try client.send("GET game 999").status.hasPrefix("-ERR NOT_FOUND"))
        try client.ok(#"INSERT game name="Counted""#)
        try client.ok("SAVE")
        let metrics = try adminGet(admin, "/metrics")
        #expect(metrics.status == "HTTP/1.1 200 OK")
        // Every line is a comment (HELP/TYPE) or `name{labels} value` with a number.
        for line in metrics.body where !line.isEmpty {
            if line.hasPrefix("# HELP ") || line.hasPrefix("# TYPE ") { continue }
            let parts = line.split(separator: " ")
            #expect(parts.count == 2 && Double(parts[1]) != nil && parts[0].range(of: #"^[a-z_]+(\{[a-z]+="[^"]*"(,[a-z]+="[^"]*")*\})?$"#, options: .regularExpression) != nil, "\(line)")
        }
        for expected in [#"recordsd_commands_total{verb="PING",outcome="ok"} 3"#, #"recordsd_commands_total{verb="GET",outcome="NOT_FOUND"} 1"#,
                         #"recordsd_commands_total{verb="SAVE",outcome="ok"} 1"#, #"recordsd_commands_total{verb="INSERT",outcome="ok"} 1"#,
                         "recordsd_save_seconds_count 1", "recordsd_sessions 1", "recordsd_pool_size 3"] {
            #expect(metrics.body.contains(expected), "\(expected) not in \(metrics.body)")
        }
        // PostgreSQL out of reach: not ready; back: ready again. `recordsd health` (the
        // container's health check) follows /ready.
        let health = { try runRecordsd(["health", "--admin-listen", "127.0.0.1:\(admin)"]) }
        #expect(try health().status == 0)
        proxy.refuseConnections(true)
        #expect(try adminGet(admin, "/ready").status == "HTTP/1.1 503 Service Unavailable")
        let unhealthy = try health()
        #expect(unhealthy.status == 1 && unhealthy.output == "HTTP/1.1 503 Service Unavailable\n", "\(unhealthy)")
        proxy.refuseConnections(false)
        #expect(try adminGet(admin, "/ready").status == "HTTP/1.1 200 OK")
    }

    @Test func jsonLogsParseLineByLine() throws {
        let server = try TestServer(arguments: ["--log-format", "json", "--log-level", "debug"])
        let client = try server.client()
        _ = try client.send("AUTH \"x\\n2026-11-30T00:00:00.000Z INFO s1 signed in as admin\" pw")
        try client.ok(#"INSERT game name="Logged""#)
        try client.ok("SAVE")
        let lines = server.log.split(separator: "\n")
        #expect(lines.count >= 3)
        for line in lines {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect(object?["time"] is String && object?["level"] is String && object?["message"] is String, "\(line)")
        }
        #expect(lines.contains { $0.contains(#""message":"saved: 1 inserted"#) })
    }

    @Test func slowCommandsAreLoggedWithTheirTextSecretsExcepted() throws {
        let server = try TestServer(arguments: ["--log-slow", "0"])
        let setup = try server.client()
        try setup.ok(#"USER ADD carol writer "carol-secret-1""#)
        let client = try server.client()
        try client.ok(#"AUTH carol "carol-secret-1""#)
        try client.ok("COUNT game WHERE name == \"x\"")
        let log = server.log
        #expect(log.contains(#"slow command, "#) && log.contains(#": "COUNT game WHERE name == \"x\"""#), "\(log)")
        #expect(log.contains(": AUTH ..."), "\(log)")
        #expect(!log.contains("carol-secret-1"))
    }

    /// The samples of a /metrics body as Prometheus's own parser (the Python client's
    /// `text_string_to_metric_families`, installed by scripts/test) reads them:
    /// `name{label="v",...}` (labels sorted) to value.
    func prometheus(_ body: [String]) throws -> [String: Double] {
        let parser = """
            import sys, json
            from prometheus_client.parser import text_string_to_metric_families
            out = {}
            for family in text_string_to_metric_families(sys.stdin.read()):
                for s in family.samples:
                    labels = ",".join('%s="%s"' % (k, v) for k, v in sorted(s.labels.items()))
                    out[s.name + ("{" + labels + "}" if labels else "")] = s.value
            print(json.dumps(out))
            """
        let run = try runProcess("/usr/bin/env", ["python3", "-c", parser], input: body.joined(separator: "\n") + "\n")
        guard run.status == 0, let object = try JSONSerialization.jsonObject(with: Data(run.output.utf8)) as? [String: Double] else {
            throw TestFailure("the Prometheus parser refused the metrics: \(run.error)")
        }
        return object
    }

    /// Each family the issue asks for, read by a real Prometheus parser, moves by what known
    /// commands do: rows written, bytes, sign-ins, WATCH events, limits, TLS handshakes, pool.
    @Test func metricsMoveByWhatHappened() throws {
        let certificates = try TestCertificates()
        let server = try TestServer(arguments: ["--admin-listen", "127.0.0.1:0", "--max-line-length", "4096",
                                                "--tls-cert", certificates.cert, "--tls-key", certificates.key, "--tls-listen", "127.0.0.1:0"])
        let admin = try server.adminPort()
        let before = try prometheus(try adminGet(admin, "/metrics").body)
        #expect(before["recordsd_rows_written_total{operation=\"inserted\"}"] == 0)
        #expect(before["recordsd_sessions_signed_in"] == 0)
        let setup = try server.client()
        try setup.ok(#"USER ADD dana writer "dana-secret-1""#)
        let watcher = try server.client()
        try watcher.ok(#"AUTH dana "dana-secret-1""#)
        try watcher.ok("WATCH game")
        let writer = try server.client()
        try writer.ok(#"AUTH dana "dana-secret-1""#)
        try writer.ok(#"INSERT game name="One""#)
        try writer.ok(#"INSERT game name="Two""#)
        try writer.ok("SAVE")
        try writer.ok(#"UPDATE game name="One" SET name="Uno""#)
        try writer.ok("SAVE")
        _ = eventually(tries: 100, { _ = try? watcher.send("PING"); return watcher.pushed }, until: { $0.count >= 2 })
        #expect(try writer.send(String(repeating: "x", count: 5000)).status.hasPrefix("-ERR LIMIT"))
        _ = try LineClient(port: server.tlsPort, directTLS: certificates.ca).send("PING")
        _ = try? LineClient(port: server.tlsPort, timeout: 5, readBanner: false).write("not TLS at all\r\n\r\n")
        let after = eventually(tries: 50, { try? prometheus(try adminGet(admin, "/metrics").body) }, until: { ($0?["recordsd_tls_handshakes_total{outcome=\"failed\"}"] ?? 0) >= 1 }) ?? [:]
        #expect(after["recordsd_rows_written_total{operation=\"inserted\"}"] == 2, "\(after)")
        #expect(after["recordsd_rows_written_total{operation=\"updated\"}"] == 1)
        #expect(after["recordsd_sessions_signed_in"] == 2)
        #expect((after["recordsd_watch_events_total{outcome=\"queued\"}"] ?? 0) >= 2)
        #expect(after["recordsd_watch_events_total{outcome=\"dropped\"}"] == 0)
        #expect(after["recordsd_watch_lag_seconds"].map { $0 >= 0 && $0 < 60 } == true)
        #expect(after["recordsd_limits_total{limit=\"line_length\"}"] == 1)
        #expect(after["recordsd_tls_handshakes_total{outcome=\"ok\"}"] == 1)
        #expect(after["recordsd_tls_handshakes_total{outcome=\"failed\"}"] == 1)
        #expect((after["recordsd_bytes_total{direction=\"in\"}"] ?? 0) > 5000 && (after["recordsd_bytes_total{direction=\"out\"}"] ?? 0) > 0)
        #expect((after["recordsd_pool_jobs_total"] ?? 0) >= 2 && (after["recordsd_pool_wait_seconds_total"] ?? -1) >= 0)
        #expect(after["recordsd_commands_total{outcome=\"ok\",verb=\"SAVE\"}"] == 2)
        #expect(after["recordsd_save_seconds_count"] == 2)
    }
}
