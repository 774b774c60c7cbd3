import Foundation
import Postgres
import Testing

/// Start-up as an operator meets it: what cannot fix itself fails at once, in one line.
@Suite struct StartupTests {
    @Test func whatWillNotFixItselfFailsAtOnce() throws {
        let url = try TestEnvironment.freshDatabase()
        var components = URLComponents(string: url)!
        components.path = "/no_such_database_here"
        // PostgreSQL answers and refuses: no 30 s of retries.
        let missing = try runRecordsd(["serve", "--listen", "127.0.0.1:0", "--database", components.string!])
        #expect(missing.status == 1)
        #expect(missing.error.contains("refused the connection"), "\(missing.error)")
        #expect(!missing.error.contains("waiting for PostgreSQL"))
        // libpq cannot use the address at all.
        let malformed = try runRecordsd(["serve", "--listen", "127.0.0.1:0", "--database", "host=127.0.0.1 port=not-a-port dbname=x"])
        #expect(malformed.status == 1)
        #expect(malformed.error.contains("the address is malformed"), "\(malformed.error)")
    }

    @Test func aSignalEndsTheWaitForPostgreSQL() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: TestEnvironment.recordsdBinary)
        // Nothing listens on port 1: a server that does not answer is waited for ...
        process.arguments = ["serve", "--listen", "127.0.0.1:0", "--database", "postgresql://postgres@127.0.0.1:1/x"]
        let err = Pipe()
        process.standardError = err
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        let waiting = eventually(tries: 100, { (try? String(contentsOf: URL(fileURLWithPath: "/proc/\(process.processIdentifier)/status"), encoding: .utf8)) ?? "" },
                                 until: { _ in true })
        #expect(!waiting.isEmpty)
        Thread.sleep(forTimeInterval: 1.5)
        // ... until SIGTERM, which it honours at once.
        kill(process.processIdentifier, SIGTERM)
        process.waitUntilExit()
        let text = String(decoding: err.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(process.terminationStatus == 1)
        #expect(text.contains("waiting for PostgreSQL") && text.contains("while waiting for PostgreSQL: stopped"), "\(text)")
    }

    @Test func userCommandsNeverApplyMigrations() throws {
        let url = try TestEnvironment.freshDatabase()
        let listed = try runRecordsd(["user", "list", "--database", url, "--migrations", TestEnvironment.migrations])
        #expect(listed.status == 0, "\(listed.error)")
        let db = try Connection(url)
        #expect(try db.query("SELECT count(*) FROM records.schema_migrations").string(0, 0) == "0")
        #expect(try db.query("SELECT to_regclass('public.employee') IS NULL").bool(0, 0) == true)
        #expect(try db.query("SELECT to_regclass('records.users') IS NOT NULL").bool(0, 0) == true)
    }

    @Test func aPortInUseStopsStartUpBeforeMigrations() throws {
        let busy = try TestServer()
        let url = try TestEnvironment.freshDatabase()
        let run = try runRecordsd(["serve", "--listen", "127.0.0.1:\(busy.port)", "--database", url, "--migrations", TestEnvironment.migrations])
        #expect(run.status != 0)
        #expect(run.error.contains("bind 127.0.0.1:\(busy.port)"), "\(run.error)")
        #expect(try Connection(url).query("SELECT to_regclass('records.schema_migrations') IS NULL").bool(0, 0) == true)
    }

    /// An unreachable PostgreSQL is waited for `--startup-timeout` seconds, then named; a URL
    /// of another scheme is said to be one (it read as a malformed address naming a socket
    /// nobody gave).
    @Test func startUpWaitsABoundedTimeAndNamesWhatItWaitedFor() throws {
        let waited = try runRecordsd(["serve", "--listen", "127.0.0.1:0", "--startup-timeout", "2", "--database", "postgresql://postgres@127.0.0.1:1/x"])
        #expect(waited.status == 1)
        #expect(waited.error.contains("PostgreSQL (user=postgres dbname=x host=127.0.0.1 port=1) did not answer within 2 s"), "\(waited.error)")
        let scheme = try runRecordsd(["serve", "--listen", "127.0.0.1:0", "--database", "postgresq://postgres@127.0.0.1/x"])
        #expect(scheme.status == 1)
        #expect(scheme.error.contains("unknown scheme 'postgresq' in the database URL"), "\(scheme.error)")
        #expect(!scheme.error.contains("socket"))
        let wrong = try runRecordsd(["--startup-timeout", "-1"])
        #expect(wrong.status == 2 && wrong.error == "recordsd: --startup-timeout takes a whole number, 0 or more, not '-1'\ntry `recordsd --help`\n", "\(wrong.error)")
    }

    /// The admin port is bound with the client port, before anything is changed: one in use
    /// fails start-up at once, not after the migrations.
    @Test func aBusyAdminPortStopsStartUpBeforeMigrations() throws {
        let busy = try TestServer(arguments: ["--admin-listen", "127.0.0.1:0"])
        let admin = try busy.adminPort()
        let url = try TestEnvironment.freshDatabase()
        let run = try runRecordsd(["serve", "--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:\(admin)", "--database", url,
                                   "--migrations", TestEnvironment.migrations])
        #expect(run.status != 0)
        #expect(run.error.contains("bind 127.0.0.1:\(admin)"), "\(run.error)")
        #expect(try Connection(url).query("SELECT to_regclass('records.schema_migrations') IS NULL").bool(0, 0) == true)
    }
}
