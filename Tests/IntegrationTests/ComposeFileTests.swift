import Foundation
import Testing

/// No Docker engine runs on these machines: keep docker-compose.yml valid with
/// `docker-compose config` (which needs none), and the Dockerfile's essentials in place.
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
        #expect(Set(services.split(separator: "\n").map(String.init)) == ["postgres", "migrate", "users", "recordsd-1", "recordsd-2", "balancer", "integration"])
        let (_, config) = try compose(["--profile", "test", "config"])
        #expect(config.contains("RECORDS_SECOND_URL: records://admin@recordsd-2:7878?tls=require"))
        #expect(config.contains("condition: service_healthy"))
        // What keeps it running: every long-running service restarts, its logs rotate,
        // PostgreSQL is checked over TCP, replicas get more than --shutdown-grace to stop.
        #expect(config.components(separatedBy: "restart: unless-stopped").count - 1 == 4)
        #expect(config.components(separatedBy: "max-size: 10m").count - 1 == 4)
        // The balancer: HAProxy's own config, TCP in front of both replicas.
        #expect(config.contains("RECORDS_BALANCER_URL: records://admin@balancer:7870?tls=require"))
        let haproxy = try String(contentsOfFile: TestEnvironment.root + "/docker/haproxy/haproxy.cfg", encoding: .utf8)
        #expect(haproxy.contains("mode tcp") && haproxy.contains("server recordsd-1 recordsd-1:7878") && haproxy.contains("server recordsd-2 recordsd-2:7878"))
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
        #expect(dockerfile.contains("FROM build AS test"))
        // The runtime image's build never reads Tests/: only the test stage copies them.
        let runtimeBuild = dockerfile.components(separatedBy: "FROM build AS test")[0]
        #expect(!runtimeBuild.contains("COPY Tests"))
        // The image's migrations and the stack's suite are this repository's.
        #expect(dockerfile.contains("COPY --chown=recordsd migrations"))
    }
}
