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
        func compose(_ arguments: [String]) throws -> (Int32, String) {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: binary)
            process.arguments = ["-f", TestEnvironment.root + "/docker-compose.yml"] + arguments
            process.currentDirectoryURL = URL(fileURLWithPath: TestEnvironment.root)
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
        let (_, services) = try compose(["--profile", "test", "config", "--services"])
        #expect(Set(services.split(separator: "\n").map(String.init)) == ["postgres", "users", "recordsd-1", "recordsd-2", "integration"])
        let (_, config) = try compose(["--profile", "test", "config"])
        #expect(config.contains("RECORDS_SECOND_URL: records://admin@recordsd-2:7878"))
        #expect(config.contains("condition: service_healthy"))
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
