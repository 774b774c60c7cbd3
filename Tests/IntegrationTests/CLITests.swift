#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Postgres
import RecordsProtocol
import Testing

/// The built `records` binary against a real server.
@Suite struct CLITests {
    static var binary: String { TestEnvironment.recordsBinary }

    private func records(_ arguments: [String], input: String? = nil, environment: [String: String] = [:]) throws -> (status: Int32, output: String, error: String) {
        try runProcess(Self.binary, arguments, environment: ["NO_COLOR": "1", "RECORDS_URL": nil].merging(environment.mapValues { Optional($0) }) { $1 }, input: input)
    }

    private func seeded() throws -> TestServer {
        let server = try TestServer()
        try server.database().execute("""
            INSERT INTO department (id, name, number, phone) VALUES (1, 'Sales', 10, NULL), (2, 'A very long department name indeed, longer than a column', 20, '555');
            SELECT setval('department_id_seq', 10);
            """)
        return server
    }

    @Test func oneShotCommandsInEachFormat() throws {
        let server = try seeded()
        let port = String(server.port)
        let json = try records(["-p", port, "-c", "FIND department ORDER BY id"])
        #expect(json.status == 0)
        #expect(json.output == """
            {"id":1,"name":"Sales","number":10,"phone":null}
            {"id":2,"name":"A very long department name indeed, longer than a column","number":20,"phone":"555"}

            """)
        let csv = try records(["-p", port, "--format", "csv", "-c", "FIND department ORDER BY id"])
        #expect(csv.output == "id,name,number,phone\n1,Sales,10,\n2,\"A very long department name indeed, longer than a column\",20,555\n")
        let table = try records(["-p", port, "--format", "table", "-c", "FIND department ORDER BY id"])
        let lines = table.output.split(separator: "\n").map(String.init)
        #expect(lines[0] == "id │ name                             │ number │ phone")
        // Numbers right-aligned, as psql aligns them.
        #expect(lines[2] == " 1 │ Sales                            │     10 │ ∅    ")
        #expect(lines[3] == " 2 │ A very long department name ind… │     20 │ 555  ")
        #expect(lines[4].hasPrefix("(2 records, ") && lines[4].hasSuffix(" ms)"))
        let failed = try records(["-p", port, "-c", "FIND nothing"])
        #expect(failed.status == 1)
        #expect(failed.error == "ERROR UNKNOWN unknown entity 'nothing': type ENTITIES for the list\n")
    }

    @Test func scriptsStopAtTheFirstErrorUnlessToldToGoOn() throws {
        let server = try seeded()
        let script = "INSERT game name=\"one\"\nINSERT game nme=\"typo\"\nSAVE\n"
        let stopped = try records(["-p", String(server.port)], input: script)
        #expect(stopped.status == 1)
        #expect(stopped.error.contains("stopped at stdin line 2: INSERT game nme=\"typo\""))
        #expect(try server.database().query("SELECT count(*) FROM game").string(0, 0) == "0")
        let goneOn = try records(["-p", String(server.port), "--continue"], input: script)
        #expect(goneOn.status == 1)
        #expect(try server.database().query("SELECT count(*) FROM game").string(0, 0) == "1")
        let path = NSTemporaryDirectory() + "script-\(UUID().uuidString).rec"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try "-- a comment\nINSERT game name=\"two\"\n\nSAVE\nCOUNT game\n".write(toFile: path, atomically: false, encoding: .utf8)
        let file = try records(["-p", String(server.port), "-f", path])
        #expect(file.status == 0, "\(file.error)")
        #expect(file.output.contains("#g1 game "))
    }

    /// `--format json` puts only JSON on stdout: every verb's example from the verb table, and a
    /// unit's writes (INSERT's acknowledgement and SAVE's summary were text), each line one
    /// object; INFO's numbers are numbers. Without `--format`, a piped script shows the status
    /// lines the shell shows (SAVE's `saved: ...`, DELETE's), which it dropped.
    @Test func jsonOutputIsOnlyJSONAndScriptsKeepTheirStatusLines() throws {
        let server = try seeded()
        let port = String(server.port)
        func objects(_ output: String) -> [[String: Any]?] {
            output.split(separator: "\n").map { try? JSONSerialization.jsonObject(with: Data($0.utf8)) as? [String: Any] }
        }
        let unit = try records(["-p", port, "--format", "json", "-c", #"INSERT game name="Hex""#, "-c", "SAVE", "-c", "DELETE department 2",
                                "-c", "CHANGES", "-c", "ROLLBACK", "-c", "INFO", "-c", "COUNT game", "-c", "PING"])
        #expect(unit.status == 0, "\(unit.error)")
        let lines = objects(unit.output)
        #expect(lines.allSatisfy { $0 != nil }, "\(unit.output)")
        #expect(lines.contains { $0?["status"] as? String == "saved: 1 inserted, 0 updated, 0 deleted, 0 cascaded, 0 nullified" }, "\(unit.output)")
        #expect(lines.contains { $0?["ref"] as? String == "#g1" && $0?["entity"] as? String == "game" }, "\(unit.output)")
        #expect(lines.contains { $0?["sessions"] as? Int == 1 }, "\(unit.output)")
        let script = try records(["-p", port], input: "INSERT game name=\"Go\"\nSAVE\nDELETE department 1\nROLLBACK\n")
        #expect(script.status == 0, "\(script.error)")
        #expect(script.output.split(separator: "\n").map(String.init) == [
            "#g1 pending insert game (1 pending)", "#g1 game 2", "saved: 1 inserted, 0 updated, 0 deleted, 0 cascaded, 0 nullified",
            "pending delete department 1 (1 pending)", "rolled back 1 pending change(s)",
        ], "\(script.output)")
        // Last: one example adds a user, after which every command must sign in.
        for verb in Verb.allCases where verb != .quit {
            let run = try records(["-p", port, "--format", "json", "-c", verb.facts.example])
            #expect(objects(run.output).allSatisfy { $0 != nil }, "\(verb.facts.example): \(run.output)")
        }
    }

    @Test func exitStatusesForConnectAndUsage() throws {
        let refused = try records(["-p", "1", "-c", "PING"])
        #expect(refused.status == 3)
        #expect(refused.error.contains("could not connect to localhost:1: connection refused — is recordsd running?"))
        let usage = try records(["--format", "xml"])
        #expect(usage.status == 2)
        // One line and where help is, not the forty lines of help.
        #expect(usage.error == "records: --format takes table, json or csv, not 'xml'\ntry `records --help`\n")
        let help = try records(["--help"])
        #expect(help.status == 0 && help.output.contains("RECORDS_URL=records://user@host:port"))
    }

    @Test func signsInWithAUserAndRefusesBadPasswords() throws {
        let server = try seeded()
        try server.client().ok("USER ADD alice writer \"alice-password\"")
        let url = "records://alice@127.0.0.1:\(server.port)"
        let ok = try records(["-c", "COUNT department"], environment: ["RECORDS_URL": url, "RECORDS_PASSWORD": "alice-password"])
        #expect(ok.status == 0, "\(ok.error)")
        let bad = try records(["-c", "COUNT department"], environment: ["RECORDS_URL": url, "RECORDS_PASSWORD": "wrong-one"])
        #expect(bad.status == 3)
        #expect(bad.error.contains("could not sign in as alice: AUTH invalid user name or password"))
        // No credentials where sign-in is required: 3, as the help says (it was 1).
        let none = try records(["-p", String(server.port), "-c", "COUNT department"])
        #expect(none.status == 3 && none.error.hasPrefix("ERROR AUTH"), "\(none)")
    }

    @Test func exportAndImportRoundTrip() throws {
        let server = try seeded()
        let exported = try records(["-p", String(server.port), "export", "department"])
        #expect(exported.status == 0)
        #expect(exported.output.hasPrefix("id,name,number,phone\n"))
        let path = NSTemporaryDirectory() + "departments-\(UUID().uuidString).csv"
        defer { try? FileManager.default.removeItem(atPath: path) }
        try exported.output.write(toFile: path, atomically: false, encoding: .utf8)
        let target = try TestServer()
        let imported = try records(["-p", String(target.port), "import", "department", path])
        #expect(imported.status == 0, "\(imported.error)")
        #expect(imported.error.contains("imported 2 records"))
        #expect(try target.database().query("SELECT string_agg(name, '|' ORDER BY id) FROM department").string(0, 0)
                == "Sales|A very long department name indeed, longer than a column")
    }

    @Test func theShellShowsPendingChangesAndWarnsBeforeQuitting() throws {
        let server = try seeded()
        let home = NSTemporaryDirectory() + "records-home-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: home) }
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        // `script` gives the shell a pseudo-terminal, as a person's terminal would.
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/script")
        process.arguments = ["-qc", "\(Self.binary) -p \(server.port)", "/dev/null"]
        process.environment = ["HOME": home, "NO_COLOR": "1", "TERM": "dumb", "PATH": "/usr/bin:/bin"]
        let out = Pipe(), input = Pipe()
        process.standardOutput = out
        process.standardInput = input
        try process.run()
        input.fileHandleForWriting.write("INSERT game name=\"shell\"\nQUIT\nROLLBACK\nQUIT\n".data(using: .utf8)!)
        let data = out.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let screen = String(decoding: data, as: UTF8.self).replacingOccurrences(of: "\r", with: "")
        #expect(screen.contains("localhost [0]> "))
        #expect(screen.contains("#g1 pending insert game (1 pending)"))
        #expect(screen.contains("localhost [1]> "))
        #expect(screen.contains("1 unsaved change(s) would be lost: SAVE them, or QUIT again to drop them"))
        #expect(try String(contentsOfFile: home + "/.records_history", encoding: .utf8).contains("INSERT\\040game\\040name=\"shell\""))
    }

    /// Found by users: each failed on the code before its fix.
    @Test func noWorkLostFromTheCommandLine() throws {
        let server = try seeded()
        let port = String(server.port)
        // A #ref that looks like a count ("#v0 pending") no longer hides the pending change, and
        // a one-shot session that would drop it says so and fails.
        let dropped = try records(["-p", port, "-c", #"INSERT game AS #v0 name="Risk""#])
        #expect(dropped.status == 1)
        #expect(dropped.error.contains("1 pending change(s) not saved: the session ends with the command; add -c SAVE"), "\(dropped.error)")
        // Several -c run in one session; --opt=value; --version.
        let saved = try records(["--port=\(port)", "-c", #"INSERT game name="Go""#, "-c", "SAVE"])
        #expect(saved.status == 0, "\(saved.error)")
        #expect(try server.database().query("SELECT count(*) FROM game WHERE name = 'Go'").string(0, 0) == "1")
        #expect(try records(["--version"]).output == "records 0.1.0\n")
        // A script that stopped sends nothing after the failure, IMPORT included; # comments.
        let script = "# games\nINSERT game nme=\"bad\"\nIMPORT game\nname\nBackgammon\n.\nSAVE\n"
        let stopped = try records(["-p", port], input: script)
        #expect(stopped.status == 1)
        #expect(stopped.error.contains("stopped at stdin line 2"), "\(stopped.error)")
        #expect(try server.database().query("SELECT count(*) FROM game WHERE name = 'Backgammon'").string(0, 0) == "0")
        let imported = try records(["-p", port], input: "-- games\nIMPORT game\nname\nBackgammon\n.\nCOUNT game\n")
        #expect(imported.status == 0, "\(imported.error)")
        #expect(imported.output.contains("imported 1 record"))
    }

    @Test func tablesMeasureWhatTheTerminalShows() throws {
        let server = try seeded()
        try server.database().execute("INSERT INTO department (id, name, number, phone) VALUES (3, '東京支社', 30, E'a\\tb\\nc')")
        let table = try records(["-p", String(server.port), "--format", "table", "-c", "FIND department WHERE number >= 20 ORDER BY id"])
        let lines = table.output.split(separator: "\n").map(String.init)
        // Two columns a CJK character; a tab and a line break escaped, the row on one line.
        #expect(lines[3] == " 3 │ 東京支社                         │     30 │ a\\tb\\nc", "\(lines)")
        #expect(lines.count == 5)
        // Streaming formats print what arrives, the same as before.
        let csv = try records(["-p", String(server.port), "--format", "csv", "-c", "FIND department WHERE number == 30"])
        #expect(csv.output == "id,name,number,phone\n3,東京支社,30,\"a\tb\nc\"\n")
    }

    @Test func addressesAsURLs() throws {
        let server = try seeded()
        let url = "records://127.0.0.1:\(server.port)"
        #expect(try records([url, "-c", "PING"]).output == "PONG\n")
        #expect(try records(["--url", url, "-c", "PING"]).output == "PONG\n")
        #expect(try records(["-c", "PING"], environment: ["RECORDS_URL": url]).output == "PONG\n")
        let scheme = try records(["-c", "PING"], environment: ["RECORDS_URL": "http://127.0.0.1:\(server.port)"])
        #expect(scheme.status == 2 && scheme.error.contains("the scheme is records:// or recordss://, not http://"), "\(scheme)")
        // An IPv6 address in brackets is the host ::1 (nothing listens there on port 1).
        let ipv6 = try records(["records://[::1]:1", "-c", "PING"])
        #expect(ipv6.status == 3 && ipv6.error.contains("::1") && !ipv6.error.contains("unknown host"), "\(ipv6)")
    }

    /// The shell under a pseudo-terminal (Python's pty drives it as a person would, with pauses).
    @Test func ctrlCNeverLeavesTheShellNorLosesWork() throws {
        let server = try seeded()
        try server.database().execute("INSERT INTO employee (first_name, last_name, gender) SELECT 'f' || i, 'l' || i, 1 FROM generate_series(1, 100000) i")
        let out = try typed(server, [("FIND gam", 0.3), ("\u{3}", 1), ("INSERT game name=\"kept\"\r", 1), ("FIND employee\r", 0.05), ("\u{3}", 3),
                                     ("QUIT\r", 1), ("SAVE\r", 1), ("QUIT\r", 1)])
        #expect(out.contains("FIND gam^C\nlocalhost [0]> "), "\(out)")
        // The FIND is cancelled on the server, or had ended before the cancel reached it.
        #expect(out.contains("^C: cancelled on the server; the unit of work is as it was")
                || out.contains("^C: output dropped; the command had ended: +OK 100000 records"), "\(out)")
        #expect(out.contains("1 unsaved change(s) would be lost: SAVE them, or QUIT again to drop them"), "\(out)")
        #expect(out.hasSuffix("exit 0\n"), "\(out)")
        #expect(try server.database().query("SELECT count(*) FROM game WHERE name = 'kept'").string(0, 0) == "1")
    }

    /// Ctrl-C while a command runs asks the server to cancel it, as psql does: a SAVE waiting
    /// for a lock stops, and the shell's unit is as it was (it used to wait the SAVE out).
    @Test func ctrlCCancelsTheCommandOnTheServer() throws {
        let server = try TestServer(arguments: ["--lock-timeout", "120"])
        try server.database().execute("INSERT INTO game (id, name) VALUES (1, 'Chess')")
        let holder = try Connection(server.databaseURL)
        try holder.execute("BEGIN; SELECT * FROM game WHERE id = 1 FOR UPDATE")
        let out = try typed(server, [("UPDATE game 1 name=\"Go\"\r", 1), ("SAVE\r", 2), ("\u{3}", 2), ("CHANGES\r", 1),
                                     ("ROLLBACK\r", 1), ("QUIT\r", 1)])
        try holder.execute("ROLLBACK")
        #expect(out.contains("^C: cancelled on the server; the unit of work is as it was"), "\(out)")
        #expect(out.contains("update game 1 name: \"Chess\" -> \"Go\""), "\(out)")
        #expect(try server.database().query("SELECT name FROM game WHERE id = 1").string(0, 0) == "Chess")
    }

    /// A value from a file, larger than an argument may be: `photo=@file:PATH` goes in as the
    /// attribute's type has it (base64 for bytea, the text for text), in `-c` and in scripts;
    /// a file that cannot be read is a usage error that sends nothing.
    @Test func valuesFromFiles() throws {
        let server = try seeded()
        let port = String(server.port)
        let folder = NSTemporaryDirectory() + "values-\(UUID().uuidString)/"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: folder) }
        var generator = SystemRandomNumberGenerator()
        let photo = Data((0..<200_000).map { _ in UInt8.random(in: 0...255, using: &generator) })
        try photo.write(to: URL(fileURLWithPath: folder + "me.jpg"))
        let note = "a \"quoted\" line\nand a second, with \\ and é"
        try note.write(toFile: folder + "my status.txt", atomically: true, encoding: .utf8)
        let run = try records(["-p", port, "-c", "INSERT friend first_name=\"Ann\" photo=@file:\(folder)me.jpg status=@file:\"\(folder)my status.txt\"",
                               "-c", "SAVE"])
        #expect(run.status == 0, "\(run.error)")
        let db = try server.database()
        #expect(try db.query("SELECT encode(photo, 'base64') FROM friend WHERE first_name = 'Ann'").string(0, 0)?.replacingOccurrences(of: "\n", with: "")
                == photo.base64EncodedString())
        #expect(try db.query("SELECT status FROM friend WHERE first_name = 'Ann'").string(0, 0) == note)
        let script = try records(["-p", port], input: "UPDATE friend WHERE first_name == \"Ann\" SET status=@file:\"\(folder)my status.txt\"\nSAVE\n")
        #expect(script.status == 0, "\(script.error)")
        let missing = try records(["-p", port, "-c", "INSERT friend photo=@file:\(folder)none.jpg"])
        #expect(missing.status == 2 && missing.error.contains("cannot read \(folder)none.jpg (the value of photo)"), "\(missing)")
        #expect(try db.query("SELECT count(*) FROM friend").string(0, 0) == "1")
    }

    /// Tab completes by position, from the server's model: attributes after an entity (not the
    /// verb FIND for `fi`), names through a relationship after a `.`, entities once each.
    @Test func tabCompletesFromTheSchema() throws {
        let server = try seeded()
        let out = try typed(server, [("FIND employee WHERE la\t", 1), ("\u{3}", 1), ("FIND employee WHERE fi\t", 1), ("\u{3}", 1),
                                     ("FIND employee WHERE department.nu\t", 1), ("\u{3}", 1), ("QUIT\r", 1)])
            .replacingOccurrences(of: "\u{1B}\\[[0-9;]*[A-Za-z]", with: "", options: .regularExpression)  // the cursor's moves
            .replacingOccurrences(of: "\u{7}", with: "")  // the bell
        #expect(out.contains("FIND employee WHERE last_name"), "\(out)")
        #expect(out.contains("FIND employee WHERE first_name"), "\(out)")
        #expect(out.contains("FIND employee WHERE department.number"), "\(out)")
    }

    /// A quote or a parenthesis left open reads on, as psql does: a line break typed inside a
    /// string is the string's, one inside parentheses a space.
    @Test func anOpenQuoteOrParenthesisReadsOn() throws {
        let server = try seeded()
        let out = try typed(server, [("INSERT game name=\"two\r", 0.5), ("lines\"\r", 1), ("COUNT game WHERE (id > 0\r", 0.5), ("AND id < 100)\r", 1),
                                     ("SAVE\r", 1), ("QUIT\r", 1)])
        #expect(out.contains("... "), "\(out)")
        #expect(out.contains("#g1 pending insert game (1 pending)"), "\(out)")
        #expect(try server.database().query("SELECT name FROM game").string(0, 0) == "two\nlines")
    }

    /// `\semicolon on`: a command ends at `;` outside quotes, as in psql — one over several
    /// lines, several on one line; the shell's own commands and QUIT are taken at once.
    @Test func semicolonModeEndsCommandsAtSemicolons() throws {
        let server = try seeded()
        let out = try typed(server, [("\\semicolon on\r", 0.5), ("INSERT game\r", 0.5), ("name=\"a;b\";\r", 1),
                                     ("INSERT game name=\"c\"; INSERT game name=\"d\"; SAVE;\r", 1.5),
                                     ("\\semicolon off\r", 0.5), ("COUNT game\r", 1), ("QUIT\r", 1)])
        #expect(out.contains("a command ends at ; (several on a line, or one over several lines)"), "\(out)")
        #expect(out.contains("... "), "\(out)")
        #expect(out.contains("#g3 pending insert game (3 pending)"), "\(out)")
        #expect(out.contains("saved: 3 inserted"), "\(out)")
        #expect(try server.database().query("SELECT string_agg(name, ',' ORDER BY name) FROM game").string(0, 0) == "a;b,c,d")
    }

    /// psql's habits: `\?` lists the shell's own commands, an unknown backslash command is
    /// said to be one (not sent as a verb), and a SYNTAX error shows a caret under its column,
    /// wide characters counted as the terminal shows them.
    @Test func theShellListsItsCommandsAndPointsAtSyntaxErrors() throws {
        let server = try seeded()
        let out = try typed(server, [("\\?\r", 1), ("FIND department LIMIT x\r", 1), ("SAVE KEY 東京 x\r", 1), ("\\nope\r", 1), ("QUIT\r", 1)])
        #expect(out.contains("\\x [on|off|auto]         expanded display"), "\(out)")
        #expect(out.contains("ERROR SYNTAX at 23: expected a limit (a whole number, 0 or more), found 'x'\n  FIND department LIMIT x\n                        ^\n"), "\(out)")
        #expect(out.contains("  SAVE KEY 東京 x\n           ^\n"), "\(out)")
        #expect(out.contains("unknown shell command \\nope: \\? lists them (HELP lists the server's verbs)"), "\(out)")
    }

    /// The shell under a pty typing `steps` (keys, then seconds to read); its screen and status.
    private func typed(_ server: TestServer, _ steps: [(String, Double)], rows: Int = 0, columns: Int = 0, pager: String? = nil) throws -> String {
        try typedShell(port: server.port, steps, rows: rows, columns: columns, pager: pager)
    }

    /// The prompt's count comes from the server, whatever the reply's text holds; IMPORT is typed
    /// in the shell (and `\\import` loads a file); QUIT with changes asks first.
    @Test func theShellCountsImportsAndWarnsAsTheServerSays() throws {
        let server = try seeded()
        let csv = FileManager.default.temporaryDirectory.appendingPathComponent("games-\(UUID()).csv").path
        try "name\nGo\nHex\n".write(toFile: csv, atomically: true, encoding: .utf8)
        defer { try? FileManager.default.removeItem(atPath: csv) }
        let out = try typed(server, [
            ("INSERT game AS #v0 name=\"Risk\"\r", 1), ("INSERT game AS #pending2 name=\"(2 pending)\"\r", 1),
            ("IMPORT game\r", 0.5), ("name\r", 0.3), ("Backgammon\r", 0.3), (".\r", 1),
            ("\\import game \(csv)\r", 1.5),
            ("QUIT\r", 1), ("SAVE\r", 1), ("QUIT\r", 1),
        ])
        #expect(out.contains("localhost [1]> INSERT game AS #pending2"), "\(out)")
        #expect(out.contains("localhost [2]> IMPORT game"), "\(out)")
        #expect(out.contains("... name"), "\(out)")
        #expect(out.contains("... .\nimported 1 record\nlocalhost [2]> "), "\(out)")
        #expect(out.contains("imported 2 records\nlocalhost [2]> QUIT"), "\(out)")
        // The progress line's last drawing erases what the one before it left (`TA 0s`).
        #expect(out.contains("100%  2 rows") && out.contains("KiB\u{1B}[K\n"), "\(out)")
        #expect(out.contains("2 unsaved change(s) would be lost: SAVE them, or QUIT again to drop them"), "\(out)")
        #expect(out.hasSuffix("exit 0\n"), "\(out)")
        let names = try server.database().query("SELECT string_agg(name, ',' ORDER BY name) FROM game WHERE name IN ('Risk', '(2 pending)', 'Backgammon', 'Go', 'Hex')")
        #expect(names.string(0, 0) == "(2 pending),Backgammon,Go,Hex,Risk")
    }

    /// A WATCH event shows at the prompt as it arrives, without typing, and the half-typed
    /// line is drawn again after it.
    @Test func watchEventsShowWhileThePromptWaits() throws {
        let server = try seeded()
        let other = "\(Self.binary) -p \(server.port) -c 'INSERT game name=\"Live\"' -c SAVE"
        let out = try typed(server, [("WATCH game\r", 1), ("FIND ga", 0.5), ("run:" + other, 2), ("\u{15}QUIT\r", 1)])
        #expect(out.contains("+OK watching game") || out.contains("watching game"), "\(out)")
        let event = try #require(out.range(of: "! game "), "\(out)")
        #expect(out[event.lowerBound...].contains(" inserted\nlocalhost [0]> FIND ga"), "\(out)")
        #expect(out.hasSuffix("exit 0\n"), "\(out)")
    }

    /// The habits of psql and redis-cli: a config file under the environment and the
    /// arguments, --format json for every reply, --repeat, a trailing `\` continuing a line,
    /// completion scripts, and `records watch` following a feed until Ctrl-C.
    @Test func conventionsOfTheCommandLine() throws {
        let server = try seeded()
        let port = String(server.port)
        let config = FileManager.default.temporaryDirectory.appendingPathComponent("records-config-\(UUID())").path
        try FileManager.default.createDirectory(atPath: config + "/records", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: config) }
        try "# defaults\nport = \(port)\nformat = json\n".write(toFile: config + "/records/config", atomically: true, encoding: .utf8)
        let described = try runProcess(Self.binary, ["-c", "DESCRIBE game"], environment: ["XDG_CONFIG_HOME": config])
        #expect(described.status == 0, "\(described)")
        #expect(described.output.hasPrefix(#"{"name":"game","key":["id"],"attributes":["#), "\(described.output)")
        try "port = nope\n".write(toFile: config + "/records/config", atomically: true, encoding: .utf8)
        let broken = try runProcess(Self.binary, ["-p", port, "-c", "PING"], environment: ["XDG_CONFIG_HOME": config])
        #expect(broken.status == 2 && broken.error.contains("records/config: --port takes a number"), "\(broken)")
        let repeated = try records(["-p", port, "--repeat", "3", "--interval", "0.01", "-c", "PING"])
        #expect(repeated.output == "PONG\nPONG\nPONG\n", "\(repeated)")
        let continued = try runProcess(Self.binary, ["-p", port], input: "INSERT game \\\nname=\"Joined\"\nSAVE\n")
        #expect(continued.status == 0, "\(continued)")
        #expect(try server.database().query("SELECT count(*) FROM game WHERE name = 'Joined'").string(0, 0) == "1")
        let bash = try records(["completion", "bash"])
        #expect(bash.status == 0 && bash.output.contains("complete -F _records records"))
        let fish = try records(["completion", "fish"])
        #expect(fish.status == 0 && fish.output.contains("complete -c records -l format") && fish.output.contains("complete -c records -s p"), "\(fish)")
        #expect(try records(["completion", "tcsh"]).status == 2)
        // `records watch` follows until Ctrl-C, which ends it with status 0.
        let follower = """
            import subprocess, sys, time, signal
            p = subprocess.Popen([sys.argv[1], "-p", sys.argv[2], "--format", "json", "watch", "game"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            time.sleep(1)
            subprocess.run([sys.argv[1], "-p", sys.argv[2], "-c", 'INSERT game name="Followed"', "-c", "SAVE"], stdout=subprocess.DEVNULL)
            time.sleep(1.5)
            p.send_signal(signal.SIGINT)
            out, err = p.communicate(timeout=10)
            print(out.decode(), end="")
            print("exit", p.returncode)
            """
        let followed = try runProcess("/usr/bin/env", ["python3", "-c", follower, Self.binary, port])
        // The key typed as its column is: a number.
        #expect(followed.output.range(of: #"^\{"entity":"game","key":[0-9]+,"operation":"inserted"\}\n"#, options: .regularExpression) != nil, "\(followed)")
        #expect(followed.output.hasSuffix("exit 0\n"), "\(followed)")
    }

    /// After a server restart the shell connects again by itself: a server that stopped handed
    /// the session off, and the shell resumes it in one line; after a crash it says what the old
    /// session took with it. It never exits.
    @Test func theShellResumesAfterARestartAndReconnectsAfterACrash() throws {
        let server = try seeded()
        let pidFile = NSTemporaryDirectory() + "records-restarted-\(UUID()).pid"
        let serve = "(exec \(TestEnvironment.recordsdBinary) serve --listen 127.0.0.1:\(server.port) --database '\(server.databaseURL)' "
            + "--migrations \(TestEnvironment.migrations) --pool-size 2 >/dev/null 2>&1 & echo $! > \(pidFile)); sleep 2"
        let restart = "kill -TERM \(server.process.processIdentifier); sleep 1; " + serve
        let crash = "kill -KILL $(cat \(pidFile)); sleep 1; " + serve
        defer { _ = try? runProcess("/bin/sh", ["-c", "kill $(cat \(pidFile)) 2>/dev/null; rm -f \(pidFile)"]) }
        let out = try typed(server, [("INSERT game name=\"Kept\"\r", 1), ("run:" + restart, 3), ("INSERT game name=\"After\"\r", 1),
                                     ("SAVE\r", 1), ("INSERT game name=\"Lost\"\r", 1), ("run:" + crash, 3), ("INSERT game name=\"Again\"\r", 1),
                                     ("SAVE\r", 1), ("QUIT\r", 1)])
        #expect(out.contains("localhost [1]> \nresumed: 1 pending change(s)\nlocalhost [1]> INSERT game name=\"After\""), "\(out)")
        #expect(!out.contains("! shutdown") && !out.contains("! handoff"), "\(out)")
        #expect(out.contains("the connection to the server was lost; its 1 pending change(s) went with the session; reconnecting..."), "\(out)")
        #expect(out.contains("reconnected to localhost:\(server.port): a new session, with no pending changes and no WATCH\nlocalhost [0]> "), "\(out)")
        #expect(out.hasSuffix("exit 0\n"), "\(out)")
        #expect(try server.database().query("SELECT string_agg(name, ',' ORDER BY name) FROM game WHERE name IN ('Kept', 'After', 'Lost', 'Again')").string(0, 0) == "After,Again,Kept")
    }

    /// What a user trying the CLI found (each failed before): CRLF scripts and files, `-c` with
    /// a line break, typed IMPORT data starting with `.`, scripts leaving changes, IMPORT without
    /// its `.`, text that is not UTF-8, ports beyond 65535, --format json after AUTH, a URL's
    /// password, CSV of records of two shapes.
    @Test func scriptsAndFilesAsAUserFoundThem() throws {
        let server = try seeded()
        let port = String(server.port)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("records-cli-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func names() throws -> String { try server.database().query("SELECT coalesce(string_agg(name, '|' ORDER BY name), '') FROM game").string(0, 0)! }
        let before = try names()
        // A CRLF script stops at its first failure: the SAVE after it never runs.
        try "INSERT game nme=\"bad\"\r\nINSERT game name=\"CRLFsaved\"\r\nSAVE\r\n".write(toFile: directory + "/crlf.rec", atomically: true, encoding: .utf8)
        let crlf = try records(["-p", port, "-f", directory + "/crlf.rec"])
        #expect(crlf.status == 1 && crlf.error.contains("stopped at \(directory)/crlf.rec line 1: INSERT game nme=\"bad\"\n"), "\(crlf)")
        #expect(try names() == before)
        let piped = try records(["-p", port], input: "PING a\r\nPING b\r\n")
        #expect(piped.output == "a\nb\n", "\(piped)")
        // -c is one line; IMPORT needs its data.
        #expect(try records(["-p", port, "-c", "PING\nINSERT game name=\"smuggled\""]).status == 2)
        #expect(try records(["-p", port, "-c", "IMPORT game"]).status == 2)
        // A script's IMPORT data is taken as written (a leading `.` kept), and must end with `.`.
        let imported = try records(["-p", port], input: "IMPORT game\nname\n.dotted\n..two\n.\nSAVE\n")
        #expect(imported.status == 0, "\(imported)")
        let unterminated = try records(["-p", port], input: "IMPORT game\nname\nNever\n")
        #expect(unterminated.status == 1 && unterminated.error.contains("has no line holding only '.'"), "\(unterminated)")
        // A script that leaves changes says so and fails, as -c does.
        let left = try records(["-p", port], input: "INSERT game name=\"left\"\n")
        #expect(left.status == 1 && left.error.contains("1 pending change(s) not saved"), "\(left)")
        // records import: a CRLF file (a quoted field's CRLF kept), and a file that is not UTF-8.
        try Data("name\r\nCRLF1\r\n\"multi\r\nline\"\r\n".utf8).write(to: URL(fileURLWithPath: directory + "/g.csv"))
        #expect(try records(["-p", port, "import", "game", directory + "/g.csv"]).status == 0)
        try Data([UInt8]("name\ncaf".utf8) + [0xE9, 10]).write(to: URL(fileURLWithPath: directory + "/latin1.csv"))
        let latin1 = try records(["-p", port, "import", "game", directory + "/latin1.csv"])
        #expect(latin1.status == 1 && latin1.error.contains("is not UTF-8"), "\(latin1)")
        let after = try names()
        for name in [".dotted", "..two", "CRLF1", "multi\r\nline"] { #expect(after.split(separator: "|").contains(Substring(name)), "\(name) in \(after)") }
        #expect(try server.database().query("SELECT count(*) FROM game WHERE name LIKE 'caf%'").string(0, 0) == "0")
        // Ports beyond 65535 do not wrap around.
        #expect(try records(["records://127.0.0.1:\(server.port + 65536)", "-c", "PING"]).status == 2)
        // CSV of records of two shapes: each shape has its header.
        let shapes = try records(["-p", port, "--format", "csv", "-c", "INSERT game name=\"Zz\"", "-c", "UPDATE department 1 number=41", "-c", "CHANGES", "-c", "ROLLBACK"])
        #expect(shapes.output.contains("op,ref,entity,values\n") && shapes.output.contains("op,entity,key,changes\n"), "\(shapes)")
        // --format json after a sign-in in a script; a URL's password.
        let setup = try server.client()
        try setup.ok(#"USER ADD carol writer "abc%41xyz""#)
        let signedIn = try records(["-p", port, "--format", "json"], input: "AUTH carol \"abc%41xyz\"\nDESCRIBE game\n")
        #expect(signedIn.output.contains(#"{"name":"game","key":["id"]"#), "\(signedIn)")
        let byURL = try records(["records://carol:abc%2541xyz@127.0.0.1:\(port)", "-c", "PING viaurl"])
        #expect(byURL.status == 0 && byURL.output == "viaurl\n", "\(byURL)")
    }

    /// A server that accepts and never speaks: the connect timeout bounds the wait for its banner.
    @Test func aSilentServerDoesNotHangTheCLI() throws {
        let silent = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(silent) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(silent, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) } }
        listen(silent, 4)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(silent, $0, &length) } }
        let port = String(UInt16(bigEndian: address.sin_port))
        let run = try records(["-p", port, "--connect-timeout", "1", "-c", "PING"])
        #expect(run.status == 3 && run.error.contains("no reply from the server in time"), "\(run)")
    }

    /// HELP on a terminal is wrapped at word boundaries to its width and paged when taller,
    /// as FIND's tables are; every word is kept, in order.
    @Test func helpIsWrappedAndPaged() throws {
        let server = try seeded()
        let out = try typed(server, [("HELP\r", 1.5), ("QUIT\r", 1)], rows: 12, columns: 40, pager: "sed s/^/P:/")
        let plainText = { (text: String) in
            text.replacingOccurrences(of: "\u{1B}\\[[0-9;]*m", with: "", options: .regularExpression).replacingOccurrences(of: "\r", with: "")
        }
        let paged = plainText(out).split(separator: "\n").filter { $0.hasPrefix("P:") }.map { String($0.dropFirst(2)) }
        #expect(paged.count > 12, "\(out)")
        #expect(paged.allSatisfy { $0.count <= 40 || !$0.trimmingCharacters(in: .whitespaces).contains(" ") }, "\(paged.filter { $0.count > 40 })")
        let plain = plainText(try records(["-p", String(server.port), "-c", "HELP"]).output)
        let words = { (text: String) in text.split(whereSeparator: { $0 == " " || $0 == "\n" }).map(String.init) }
        #expect(words(paged.joined(separator: "\n")) == words(plain))
    }

    /// On a terminal: a table wider than it becomes one block a record (psql's `\\x auto`),
    /// `\\x` switches, and output taller than the terminal goes through $PAGER.
    @Test func tablesFitTheTerminalAndLongOutputIsPaged() throws {
        let server = try seeded()
        try server.database().execute("INSERT INTO game (name) SELECT 'game ' || i FROM generate_series(1, 30) i")
        let out = try typed(server, [("FIND department ORDER BY id\r", 1), ("\\x off\r", 0.5), ("FIND department ORDER BY id\r", 1),
                                     ("FIND game ORDER BY id\r", 1.5), ("QUIT\r", 1)], rows: 12, columns: 40, pager: "sed s/^/P:/")
        #expect(out.contains("-[ RECORD 1 ]"), "\(out)")
        #expect(out.contains("name   │ A very long department name in…"), "\(out)")
        #expect(out.contains("expanded display is off"), "\(out)")
        #expect(out.contains("P:id │ name"), "\(out)")
        #expect(out.contains("P:(30 records"), "\(out)")
        #expect(out.hasSuffix("exit 0\n"), "\(out)")
    }
}
