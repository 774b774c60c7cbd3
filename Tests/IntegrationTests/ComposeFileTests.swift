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
        func compose(_ arguments: [String], secrets: String? = secrets) throws -> (Int32, String) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = ["-f", TestEnvironment.root + "/docker-compose.yml"] + arguments
            process.currentDirectoryURL = URL(fileURLWithPath: TestEnvironment.root)
            var environment = ProcessInfo.processInfo.environment
            environment["RECORDS_SECRETS"] = secrets
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
        #expect(Set(services.split(separator: "\n").map(String.init)) == ["postgres", "migrate", "users", "recordsd-1", "recordsd-2", "integration"])
        let (_, config) = try compose(["--profile", "test", "config"])
        #expect(config.contains("RECORDS_SECOND_URL: records://admin@recordsd-2:7878?tls=require"))
        #expect(config.contains("condition: service_healthy"))
        // No password in the file itself: each comes from a secret.
        let file = try String(contentsOfFile: TestEnvironment.root + "/docker-compose.yml", encoding: .utf8)
        #expect(!file.contains("PASSWORD:") && !file.contains("change-this-password"))
        #expect(file.contains("DATABASE_URL_FILE: /run/secrets/app_database_url"))
    }

    @Test func theDockerfileRunsUnprivilegedWithAHealthcheck() throws {
        let dockerfile = try String(contentsOfFile: TestEnvironment.root + "/Dockerfile", encoding: .utf8)
        #expect(dockerfile.contains("USER recordsd"))
        #expect(dockerfile.contains("HEALTHCHECK"))
        #expect(dockerfile.contains("--static-swift-stdlib"))
        #expect(dockerfile.contains("FROM build AS test"))
        // The image's migrations and the stack's suite are this repository's.
        #expect(dockerfile.contains("COPY --chown=recordsd migrations"))
    }
}
