#if canImport(Glibc)
import Glibc
#endif
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
        for expected in [#"recordsd_commands_total{verb="PING",outcome="ok"} 3"#, #"recordsd_commands_total{verb="GET",outcome="not_found"} 1"#,
                         #"recordsd_commands_total{verb="SAVE",outcome="ok"} 1"#, #"recordsd_commands_total{verb="INSERT",outcome="ok"} 1"#,
                         "recordsd_save_seconds_count 1", "recordsd_sessions 1", "recordsd_pool_size 3"] {
            #expect(metrics.body.contains(expected), "\(expected) not in \(metrics.body)")
        }
        // PostgreSQL out of reach: not ready; back: ready again. `recordsd health` (the
        // container's health check) follows /ready.
        let health = { try runRecordsd(["health", "--admin-listen", "127.0.0.1:\(admin)"]) }
        #expect(try health().status == 0)
        // (Readiness is asked of PostgreSQL every second, apart from the requests.)
        proxy.refuseConnections(true)
        #expect(eventually(tries: 50, { (try? adminGet(admin, "/ready"))?.status }, until: { $0 == "HTTP/1.1 503 Service Unavailable" })
                == "HTTP/1.1 503 Service Unavailable")
        let unhealthy = try health()
        #expect(unhealthy.status == 1 && unhealthy.output == "HTTP/1.1 503 Service Unavailable\n", "\(unhealthy)")
        proxy.refuseConnections(false)
        #expect(eventually(tries: 50, { (try? adminGet(admin, "/ready"))?.status }, until: { $0 == "HTTP/1.1 200 OK" }) == "HTTP/1.1 200 OK")
    }

    /// Under --log-format json every line the process writes is one JSON object: stdout's
    /// start-up lines too (they were text), and a command's record carries its fields.
    @Test func jsonLogsParseLineByLine() throws {
        let server = try TestServer(arguments: ["--log-format", "json", "--log-level", "debug", "--log-slow", "0", "--admin-listen", "127.0.0.1:0"])
        let client = try server.client()
        _ = try client.send("AUTH \"x\\n2026-11-30T00:00:00.000Z INFO s1 signed in as admin\" pw")
        try client.ok(#"INSERT game name="Logged""#)
        try client.ok("SAVE")
        try client.ok("FIND game")
        try client.ok("GET game 1")
        try client.ok("EXPORT game")
        let lines = server.log.split(separator: "\n")
        #expect(lines.count >= 3)
        var records: [[String: Any]] = []
        for line in lines + server.startupOutput.split(separator: "\n") {
            let object = try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any]
            #expect(object?["time"] is String && object?["level"] is String && object?["message"] is String, "\(line)")
            records.append(object ?? [:])
        }
        #expect(lines.contains { $0.contains(#""message":"saved: 1 inserted"#) })
        #expect(records.contains { $0["event"] as? String == "listening" && ($0["address"] as? String)?.hasPrefix("127.0.0.1:") == true })
        #expect(records.contains { $0["event"] as? String == "admin" })
        let find = try #require(records.first { $0["verb"] as? String == "FIND" }, "\(lines)")
        #expect(find["outcome"] as? String == "ok" && find["duration_ms"] is Int, "\(find)")
        #expect(find["remote_addr"] as? String == "127.0.0.1" && find["user"] is NSNull && find["session"] as? String != nil, "\(find)")
        // The command as it was sent, not quoted as a sentence quotes it.
        #expect(find["command"] as? String == "FIND game")
        // A streamed FIND counts the records it streamed ahead of its reply, and their bytes
        // (it said rows 0); a reply held whole gives its own.
        #expect(find["rows"] as? Int == 1 && (find["bytes"] as? Int ?? 0) > 30, "\(find)")
        let export = try #require(records.first { $0["verb"] as? String == "EXPORT" }, "\(lines)")
        #expect(export["rows"] as? Int == 1 && (export["bytes"] as? Int ?? 0) > 20, "\(export)")
        let get = try #require(records.first { $0["verb"] as? String == "GET" }, "\(lines)")
        #expect(get["rows"] as? Int == 1 && (get["bytes"] as? Int ?? 0) > 20, "\(get)")
        let auth = try #require(records.first { $0["verb"] as? String == "AUTH" })
        #expect(auth["command"] as? String == "AUTH ...")
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
                # Every family says what it is and what it means.
                if family.type == "unknown" or not family.documentation:
                    sys.exit("family %s has no TYPE or HELP" % family.name)
                out["family " + family.name] = {"counter": 1, "gauge": 2, "histogram": 3}.get(family.type, 0)
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
        #expect((after["recordsd_pool_jobs_total"] ?? 0) >= 2 && (after["recordsd_pool_wait_seconds_sum"] ?? -1) >= 0)
        #expect(after["recordsd_pool_wait_seconds_count"] == after["recordsd_pool_jobs_total"])
        // The families people expect of any server: the process's, the build's, latency by verb.
        for (family, type) in [("process_cpu_seconds", 1.0), ("process_resident_memory_bytes", 2), ("process_open_fds", 2), ("process_max_fds", 2),
                               ("process_start_time_seconds", 2), ("recordsd_build_info", 2), ("recordsd_command_seconds", 3),
                               ("recordsd_pool_wait_seconds", 3), ("recordsd_save_seconds", 3), ("recordsd_commands", 1)] {
            #expect(after["family " + family] == type, "\(family)")
        }
        #expect(after["recordsd_build_info{revision=\"unknown\",version=\"0.1.0\"}"] == 1)
        #expect(after["recordsd_command_seconds_count{verb=\"SAVE\"}"] == 2)
        #expect(after["recordsd_command_seconds_bucket{le=\"+Inf\",verb=\"PING\"}"] ?? 0 >= 1)
        #expect((after["process_open_fds"] ?? 0) > 5 && (after["process_resident_memory_bytes"] ?? 0) > 1_000_000)
        // Outcomes are lower case, as every label value.
        #expect(after.keys.filter { $0.hasPrefix("recordsd_commands_total") && $0.range(of: "outcome=\"[a-z_]+\"", options: .regularExpression) == nil }.isEmpty)
        #expect(after["recordsd_commands_total{outcome=\"ok\",verb=\"SAVE\"}"] == 2)
        #expect(after["recordsd_save_seconds_count"] == 2)
    }

    /// Whoever reaches the admin port could once blind the health checks: it served one
    /// connection at a time, so ten idle connections made /ready wait 16 s, and about 85
    /// filled its backlog. With 1,000 idle connections open, /live, /ready and /metrics answer
    /// (the oldest idle ones make room), and the client port is not held up.
    @Test func aThousandIdleConnectionsDoNotBlindTheHealthChecks() throws {
        let server = try TestServer(arguments: ["--admin-listen", "127.0.0.1:0"])
        let admin = try server.adminPort()
        var idle: [Int32] = []
        defer { idle.forEach { close($0) } }
        for _ in 0..<1000 {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = in_port_t(UInt16(admin).bigEndian)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            #expect(connected == 0)
            idle.append(fd)
        }
        for path in ["/live", "/ready", "/metrics"] {
            #expect(try adminGet(admin, path).status == "HTTP/1.1 200 OK", "\(path)")
        }
        #expect(try server.client().send("PING").status == "+OK PONG")
        // A request trickling in is cut off; a head past 8 KiB is refused.
        let slow = try LineClient(port: admin, readBanner: false)
        try slow.write("GET /live HTTP/1.1\r\n")
        #expect(try slow.readToEnd() == [])
        let huge = try LineClient(port: admin, readBanner: false)
        try huge.write("GET /live HTTP/1.1\r\nX: " + String(repeating: "a", count: 9000) + "\r\n\r\n")
        #expect(try huge.readLine() == "HTTP/1.1 431 Request Header Fields Too Large\r")
        // Kept alive: two requests on one connection, the second pipelined behind the first.
        let kept = try LineClient(port: admin, readBanner: false)
        try kept.write("GET /live HTTP/1.1\r\nHost: x\r\n\r\nGET /ready HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        let both = try kept.readToEnd().filter { $0.hasPrefix("HTTP/1.1") }
        #expect(both == ["HTTP/1.1 200 OK\r", "HTTP/1.1 200 OK\r"])
    }
}
