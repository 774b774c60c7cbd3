import Foundation
import Testing

/// docker-compose.yml and the Dockerfile, read without an engine: `docker-compose config`
/// validates the file (scripts/compose-test runs the stack itself on podman).
@Suite struct ComposeFileTests {
    @Test func theComposeFileIsValidAndNamesTheStack() throws {
        if TestEnvironment.environment["RECORDS_IN_COMPOSE"] != nil { return }  // inside the stack: nothing to validate
        let candidates = ["/usr/bin/docker-compose", "/usr/local/bin/docker-compose"]
        guard let binary = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
            Issue.record("docker-compose is not installed: scripts/test installs it (apt-get install docker-compose)")
            return
        }
        // The secrets are files scripts/compose-secrets makes; without them, nothing starts.
        let secrets = NSTemporaryDirectory() + "recordsd-secrets-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: secrets) }
        let made = try runProcess("/bin/bash", [TestEnvironment.root + "/scripts/compose-secrets", secrets])
        #expect(made.status == 0, "\(made.error)")
        for file in ["postgres_password", "app_db_password", "admin_password", "owner_database_url", "app_database_url", "tls.pem", "tls.key", "ca.pem"] {
            #expect(FileManager.default.fileExists(atPath: secrets + "/" + file), "\(file)")
        }
        func compose(_ arguments: [String], secrets: String? = secrets, environment extra: [String: String] = [:]) throws -> (Int32, String) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = ["-f", TestEnvironment.root + "/docker-compose.yml"] + arguments
            process.currentDirectoryURL = URL(fileURLWithPath: TestEnvironment.root)
            var environment = ProcessInfo.processInfo.environment
            environment["RECORDS_SECRETS"] = secrets
            for (key, value) in extra { environment[key] = value }
            process.environment = environment
            let out = Pipe()
            process.standardOutput = out
            process.standardError = out
            try process.run()
            let data = out.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            return (process.terminationStatus, String(decoding: data, as: UTF8.self))
        }
        let (status, output) = try compose(["config", "-q"])
        #expect(status == 0, "\(output)")
        let (missing, complaint) = try compose(["config", "-q"], secrets: nil)
        #expect(missing != 0)
        #expect(complaint.contains("set RECORDS_SECRETS to a directory made by scripts/compose-secrets"))
        let (_, services) = try compose(["--profile", "test", "config", "--services"])
        #expect(Set(services.split(separator: "\n").map(String.init)) == ["postgres", "migrate", "users", "recordsd-1", "recordsd-2", "balancer", "prometheus", "integration"])
        let (_, config) = try compose(["--profile", "test", "config"])
        #expect(config.contains("RECORDS_SECOND_URL: records://admin@recordsd-2:7878?tls=require"))
        #expect(config.contains("condition: service_healthy"))
        // What keeps it running: every long-running service restarts, its logs rotate,
        // PostgreSQL is checked over TCP, replicas get more than --shutdown-grace to stop.
        #expect(config.components(separatedBy: "restart: unless-stopped").count - 1 == 5)
        #expect(config.components(separatedBy: "max-size: 10m").count - 1 == 5)
        // Hardened as a production file is: every service but the test runner drops every
        // capability it does not name and gains none by exec, has a read-only root, and the
        // long-running ones limits of memory and processes.
        #expect(config.components(separatedBy: "no-new-privileges:true").count - 1 == 7)
        #expect(config.components(separatedBy: "read_only: true").count - 1 == 6)
        #expect(config.components(separatedBy: "pids_limit:").count - 1 == 5)
        #expect(config.components(separatedBy: "mem_limit:").count - 1 == 5)
        // The balancer follows readiness: it asks each replica's /ready on the admin port,
        // which the compose network reaches and the host does not.
        #expect(config.components(separatedBy: "RECORDSD_ADMIN_LISTEN: 0.0.0.0:9187").count - 1 == 2 && !config.contains(":9187:"))
        // The balancer: HAProxy's own config, TCP in front of both replicas.
        #expect(config.contains("RECORDS_BALANCER_URL: records://admin@balancer:7870?tls=require"))
        let haproxy = try String(contentsOfFile: TestEnvironment.root + "/docker/haproxy/haproxy.cfg", encoding: .utf8)
        #expect(haproxy.contains("mode tcp") && haproxy.contains("server recordsd-1 recordsd-1:7878") && haproxy.contains("server recordsd-2 recordsd-2:7878"))
        #expect(haproxy.contains("http-check send meth GET uri /ready") && haproxy.contains("check port 9187"))
        // It names each client in a PROXY header, which the replicas take from its address only.
        #expect(haproxy.contains("send-proxy") && config.contains("ipv4_address: 172.28.70.10") && config.contains("RECORDSD_PROXY_FROM: 172.28.70.10"))
        // HAProxy itself checks the file (the replicas' names need not resolve here).
        let checked = try runProcess("/usr/sbin/haproxy", ["-c", "-f", TestEnvironment.root + "/docker/haproxy/haproxy.cfg"])
        #expect(checked.status == 0 && (checked.output + checked.error).contains("Configuration file is valid"), "\(checked)")
        #expect(config.contains("pg_isready -h 127.0.0.1 -U records -d records"))
        #expect(config.components(separatedBy: "stop_grace_period: 30s").count - 1 == 2)
        // Your own migrations, mounted for the migrate service.
        let mounted = try compose(["config"], environment: ["RECORDS_MIGRATIONS_DIR": "/srv/my-migrations"]).1
        #expect(mounted.contains("/srv/my-migrations:/srv/recordsd/migrations:ro"), "\(mounted)")
        // The replicas' certificate names every host the stack's clients connect to by name
        // (the balancer's was missing: every client through it failed verification).
        let names = try runProcess("/usr/bin/openssl", ["x509", "-in", secrets + "/tls.pem", "-noout", "-ext", "subjectAltName"]).output
        for url in ["RECORDS_URL", "RECORDS_SECOND_URL", "RECORDS_BALANCER_URL"] {
            let line = config.split(separator: "\n").first { $0.contains(url + ": ") }.map(String.init) ?? ""
            let host = URLComponents(string: line.components(separatedBy: ": ").last ?? "")?.host ?? "?"
            #expect(names.contains("DNS:" + host), "\(url) names \(host), the certificate \(names)")
        }
        // No password in the file itself: each comes from a secret.
        let file = try String(contentsOfFile: TestEnvironment.root + "/docker-compose.yml", encoding: .utf8)
        #expect(!file.contains("PASSWORD:") && !file.contains("change-this-password"))
        #expect(file.contains("DATABASE_URL_FILE: /run/secrets/app_database_url"))
    }

    @Test func theDockerfileRunsUnprivilegedWithAHealthcheck() throws {
        let dockerfile = try String(contentsOfFile: TestEnvironment.root + "/Dockerfile", encoding: .utf8)
        #expect(dockerfile.contains("USER recordsd"))
        #expect(dockerfile.contains(#"HEALTHCHECK --interval=5s --timeout=4s --start-period=10s --retries=12 CMD ["recordsd", "health"]"#))
        #expect(dockerfile.contains("RECORDSD_ADMIN_LISTEN=127.0.0.1:9187"))
        #expect(dockerfile.contains("--static-swift-stdlib -Xlinker -s"))
        // The runtime image's build never reads Tests/: only the test bundle's stage copies them.
        let runtimeBuild = dockerfile.components(separatedBy: "FROM build AS test-build")[0]
        #expect(!runtimeBuild.contains("COPY Tests"))
        // The image's migrations and the stack's suite are this repository's.
        #expect(dockerfile.contains("COPY --chown=recordsd migrations"))
        // Built here or taken prebuilt (scripts/compose-images), each image comes from one
        // stage of its own, and the default target, last, is the runtime image.
        let stages = dockerfile.split(separator: "\n").filter { $0.hasPrefix("FROM ") }.map { $0.split(separator: " ").last.map(String.init) ?? "" }
        #expect(stages == ["build", "test-build", "prebuilt", "runtime-base", "test-base", "test-prebuilt", "test", "runtime-prebuilt", "runtime"])
    }
}
