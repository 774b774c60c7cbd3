import Foundation
import Postgres
import Testing

@Suite struct AuthTests {
    /// A server whose database has an admin, a writer and a reader.
    private func serverWithUsers(_ arguments: [String] = []) throws -> TestServer {
        let server = try TestServer(arguments: arguments)
        let setup = try server.client()
        #expect(setup.banner == "+OK recordsd 0.1.0 ready (no authentication); type HELP for commands")
        #expect(try setup.send("USER ADD root admin \"root-password\"").status == "+OK user root added (admin)")
        try setup.ok("USER ADD carol writer \"carol-password\"")
        try setup.ok("USER ADD bob reader \"bob-password\"")
        return server
    }

    @Test func sessionsMustSignInOnceUsersExist() throws {
        let server = try serverWithUsers()
        let client = try server.client()
        #expect(client.banner == "+OK recordsd 0.1.0 ready (authentication required: AUTH name password); type HELP for commands")
        #expect(try client.send("PING").ok)
        #expect(try client.send("HELP AUTH").ok)
        for line in ["FIND game", "INFO", "INSERT game name=\"x\"", "SAVE", "USER LIST", "ENTITIES"] {
            #expect(try client.send(line).status == "-ERR AUTH sign in first: AUTH name password (before it, only HELP, PING, QUIT and AUTH)", "\(line)")
        }
        #expect(try client.send("AUTH carol wrong-password").status == "-ERR AUTH invalid user name or password")
        #expect(try client.send("AUTH nobody \"carol-password\"").status == "-ERR AUTH invalid user name or password")
        usleep(1_100_000)  // the throttle's wait after two failures
        #expect(try client.send("AUTH carol \"carol-password\"").status == "+OK signed in as carol (writer)")
        #expect(try client.send("COUNT game").status == "+OK 0")
    }

    @Test func eachRoleAgainstEachVerb() throws {
        let server = try serverWithUsers()
        let reader = try server.client(), writer = try server.client(), admin = try server.client()
        try reader.ok("AUTH bob bob-password")
        try writer.ok("AUTH carol carol-password")
        try admin.ok("AUTH root root-password")
        let reads = ["INFO", "ENTITIES", "DESCRIBE game", "FIND game", "COUNT game", "EXPLAIN FIND game", "GET game 1"]
        let writes = ["INSERT game name=\"Go\"", "CHANGES", "NEST", "MERGE", "UPSERT game ON name name=\"Chess\"", "SAVE", "ROLLBACK"]
        for line in reads {
            for client in [reader, writer, admin] {
                let status = try client.send(line).status
                #expect(!status.hasPrefix("-ERR FORBIDDEN") && !status.hasPrefix("-ERR AUTH"), "\(line): \(status)")
            }
        }
        for line in writes {
            #expect(try reader.send(line).status == "-ERR FORBIDDEN \(line.split(separator: " ")[0]) needs the writer role; bob is reader")
            #expect(!(try writer.send(line).status.hasPrefix("-ERR FORBIDDEN")), "\(line)")
        }
        #expect(try writer.send("USER LIST").status == "-ERR FORBIDDEN USER needs the admin role; carol is writer")
        let list = try admin.send("USER LIST")
        #expect(list.status == "+OK 3 user(s)")
        #expect(list.lines.map { String($0.split(separator: " ")[0]) } == ["bob", "carol", "root"])
        #expect(try admin.send("USER ADD dave superuser \"dave-password\"").status == "-ERR SYNTAX unknown role 'superuser': reader, writer or admin")
        #expect(try admin.send("USER ADD dave reader short").status == "-ERR VALIDATION passwords have at least 8 characters")
        #expect(try admin.send("USER ADD bob reader \"bob-password\"").status == "-ERR VALIDATION user bob already exists")
        #expect(try admin.send("USER REMOVE bob").ok)
        #expect(try server.client().send("AUTH bob bob-password").status == "-ERR AUTH invalid user name or password")
    }

    @Test func aReaderCannotSaveChangesMadeAsAWriter() throws {
        let server = try serverWithUsers()
        let client = try server.client()
        try client.ok("AUTH carol carol-password")
        try client.ok("INSERT game name=\"Pending\"")
        #expect(try client.send("AUTH bob bob-password").status == "+OK signed in as bob (reader)")
        #expect(try client.send("SAVE").status == "-ERR FORBIDDEN SAVE needs the writer role; bob is reader")
        #expect(try server.database().query("SELECT count(*) FROM game").string(0, 0) == "0")
    }

    @Test func failedLoginsAreThrottledPerUserAndAddress() throws {
        // Delays of whole seconds, so that a loaded machine cannot blur them.
        let server = try serverWithUsers(["--auth-delay", "1", "--auth-lock-after", "3", "--auth-lock-seconds", "2"])
        let attacker = try server.client()
        #expect(try attacker.send("AUTH carol guess-1").status == "-ERR AUTH invalid user name or password")
        #expect(try attacker.send("AUTH carol guess-2").status == "-ERR AUTH too many failed attempts: try again in 1 s")
        usleep(1_100_000)
        #expect(try attacker.send("AUTH carol guess-3").status == "-ERR AUTH invalid user name or password")
        usleep(2_100_000)
        #expect(try attacker.send("AUTH carol guess-4").status == "-ERR AUTH invalid user name or password")
        // Locked now, even with the right password, from this address...
        #expect(try attacker.send("AUTH carol carol-password").status == "-ERR AUTH too many failed attempts: try again in 2 s")
        // ...but carol signs in from another one.
        let elsewhere = try server.client(from: "127.0.0.2")
        #expect(try elsewhere.send("AUTH carol carol-password").status == "+OK signed in as carol (writer)")
        usleep(2_100_000)
        #expect(try attacker.send("AUTH carol carol-password").status == "+OK signed in as carol (writer)")
        #expect(server.log.contains("failed AUTH for carol from 127.0.0.1"))
    }

    @Test func passwordsAreHashedAndNeverLogged() throws {
        let server = try serverWithUsers()
        let client = try server.client()
        try client.ok("AUTH carol carol-password")
        try client.ok("INSERT game name=\"Logged\"")
        try client.ok("SAVE")
        _ = try client.send("AUTH carol not-her-password")
        let hashes = try server.database().query("SELECT password_hash FROM records.users ORDER BY name").column(0).compactMap { $0 }
        #expect(hashes.count == 3)
        #expect(hashes.allSatisfy { $0.hasPrefix("$2a$10$") && $0.count == 60 })
        let log = server.log
        #expect(log.contains("saved: 1 inserted, 0 updated, 0 deleted, 0 cascaded, 0 nullified (user carol)"))
        for secret in ["root-password", "carol-password", "bob-password", "not-her-password"] {
            #expect(!log.contains(secret), "\(secret) appears in the log")
        }
    }

    @Test func nonLoopbackListenersNeedAuthentication() throws {
        let url = try TestEnvironment.freshDatabase()
        let refused = try runRecordsd(["serve", "--listen", "0.0.0.0:0", "--database", url, "--migrations", TestEnvironment.migrations])
        #expect(refused.status == 1)
        #expect(refused.error.contains("refusing to listen on 0.0.0.0 without authentication"))
        #expect(refused.error.contains("recordsd user add admin --role admin"))
        #expect(refused.error.contains("--insecure-no-auth"))
        // With authentication waived, TLS is still asked for.
        let clear = try runRecordsd(["serve", "--listen", "0.0.0.0:0", "--insecure-no-auth", "--database", url, "--migrations", TestEnvironment.migrations])
        #expect(clear.status == 1)
        #expect(clear.error.contains("refusing to listen on 0.0.0.0 without TLS"))
        #expect(clear.error.contains("--insecure-no-tls"))
        let insecure = try TestServer(databaseURL: url, arguments: ["--listen", "0.0.0.0:0", "--insecure-no-auth", "--insecure-no-tls"])
        #expect(try insecure.client().banner == "+OK recordsd 0.1.0 ready (no authentication: insecure); type HELP for commands")
        #expect(insecure.log.contains("WITHOUT AUTHENTICATION"))
        #expect(insecure.log.contains("--insecure-no-tls: serving 0.0.0.0 without TLS"))
    }

    @Test func usersFromTheCommandLine() throws {
        let url = try TestEnvironment.freshDatabase()
        let added = try runRecordsd(["user", "add", "eve", "--role", "writer", "--database", url, "--migrations", TestEnvironment.migrations],
                                    input: "eve-password-123\n")
        #expect(added.status == 0, "\(added.error)")
        #expect(added.output == "user eve added (writer); authentication is now required\n")
        let list = try runRecordsd(["user", "list", "--database", url, "--migrations", TestEnvironment.migrations])
        #expect(list.output.hasPrefix("eve  writer  created 20"))
        let server = try TestServer(databaseURL: url, arguments: ["--listen", "0.0.0.0:0"])
        let client = try server.client()
        #expect(client.banner.contains("authentication required"))
        #expect(try client.send("AUTH eve eve-password-123").status == "+OK signed in as eve (writer)")
        let missingRole = try runRecordsd(["user", "add", "x", "--database", url, "--migrations", TestEnvironment.migrations], input: "long-enough-1\n")
        #expect(missingRole.status == 2)
        #expect(missingRole.error.contains("user add needs --role reader|writer|admin"))
        #expect(try runRecordsd(["user", "remove", "eve", "--database", url, "--migrations", TestEnvironment.migrations]).status == 0)
    }
}
