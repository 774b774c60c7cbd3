import Foundation
import Testing

/// Examples/DepartmentApp, built by scripts/test, run against a real server.
@Suite struct ExampleTests {
    static var binary: String {
        TestEnvironment.environment["RECORDS_EXAMPLE_BIN"] ?? TestEnvironment.root + "/Examples/DepartmentApp/.build/debug/DepartmentApp"
    }

    @Test func theDepartmentAppRuns() throws {
        let server = try TestServer()
        let run = try runProcess(Self.binary, ["records://127.0.0.1:\(server.port)"])
        #expect(run.status == 0, "\(run.output)\(run.error)")
        #expect(run.output.components(separatedBy: "\n").filter { $0.hasPrefix("ok ") }.count == 5, "\(run.output)")
        #expect(!run.output.contains("FAILED"))
    }
}
