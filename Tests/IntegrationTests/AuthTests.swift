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
            #expect(try client.send(line).status == "-ERR AUTH sign in first: AUTH name password (before it, only HELP, PING, QUIT, STARTTLS, AUTH and CANCEL)", "\(line)")
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
        // bob's open session loses its rights at its next command.
        #expect(try reader.send("COUNT game").status == "-ERR AUTH user bob no longer exists: this session is signed out; AUTH again")
        #expect(try reader.send("COUNT game").status.hasPrefix("-ERR AUTH sign in first"))
    }

    @Test func theLastAdminStaysAndRemovedUsersLoseTheirRights() throws {
        let server = try serverWithUsers()
        let root = try server.client(), carol = try server.client()
        try root.ok("AUTH root root-password")
        try carol.ok("AUTH carol carol-password")
        #expect(try root.send("USER REMOVE root").status == "-ERR VALIDATION root is the last admin: add another admin before removing it")
        try root.ok("USER ADD ada admin \"ada-password\"")
        #expect(try root.send("USER REMOVE root").ok)
        #expect(try root.send("USER LIST").status == "-ERR AUTH user root no longer exists: this session is signed out; AUTH again")
        // Sign-in is still required of every new session.
        #expect(try server.client().banner.contains("authentication required"))
        // Removed from the command line (another process): carol's session follows its NOTIFY.
        let removed = try runRecordsd(["user", "remove", "carol", "--database", server.databaseURL, "--migrations", TestEnvironment.migrations])
        #expect(removed.status == 0, "\(removed.error)")
        let status = eventually(tries: 100, { (try? carol.send("COUNT game").status) ?? "" }, until: { $0.hasPrefix("-ERR AUTH") })
        #expect(status == "-ERR AUTH user carol no longer exists: this session is signed out; AUTH again")
    }

    @Test func changesMadeAsOneUserAreNeverSavedAsAnother() throws {
        let server = try serverWithUsers()
        let admin = try server.client()
        try admin.ok("AUTH root root-password")
        try admin.ok("USER ADD dave writer \"dave-password\"")
        let client = try server.client()
        try client.ok("AUTH carol carol-password")
        try client.ok("INSERT game name=\"Pending\"")
        let refused = "-ERR AUTH this session holds pending changes made as carol: SAVE or ROLLBACK them before signing in as another user"
        #expect(try client.send("AUTH bob bob-password").status == refused)
        #expect(try client.send("AUTH dave dave-password").status == refused)
        // Signing in again as the same user keeps the unit.
        try client.ok("AUTH carol carol-password")
        #expect(try client.send("CHANGES").lines.count == 1)
        try client.ok("ROLLBACK")
        #expect(try client.send("AUTH bob bob-password").status == "+OK signed in as bob (reader)")
        #expect(try client.send("SAVE").status == "-ERR FORBIDDEN SAVE needs the writer role; bob is reader")
        #expect(try server.database().query("SELECT count(*) FROM game").string(0, 0) == "0")
        // A user removed with changes pending leaves them to no one: the session signs out
        // and drops them, so whoever signs in next starts with nothing.
        let daves = try server.client()
        try daves.ok("AUTH dave dave-password")
        try daves.ok("INSERT game name=\"by dave\"")
        try admin.ok("USER REMOVE dave")
        #expect(try daves.send("CHANGES").status == "-ERR AUTH user dave no longer exists: this session is signed out and its pending changes dropped; AUTH again")
        try daves.ok("AUTH carol carol-password")
        #expect(try daves.send("CHANGES").lines.isEmpty)
        #expect(try daves.send("SAVE").ok)
        #expect(try server.database().query("SELECT count(*) FROM game").string(0, 0) == "0")
    }

    @Test func failedLoginsAreThrottledPerUserAndAddress() throws {
        let server = try serverWithUsers(["--auth-delay", "0.1", "--auth-lock-after", "3", "--auth-lock-seconds", "2"])
        let typist = try server.client()
        // One typo: its reply comes a little late, and the right password then works at once.
        #expect(try typist.send("AUTH carol carol-passwrod").status == "-ERR AUTH invalid user name or password")
        #expect(try typist.send("AUTH carol carol-password").status == "+OK signed in as carol (writer)")
        // Three failures in a row lock carol out from this address, even with the right password ...
        let attacker = try server.client()
        for guess in 1...3 { #expect(try attacker.send("AUTH carol guess-\(guess)").status == "-ERR AUTH invalid user name or password") }
        for _ in 1...3 {
            #expect(try attacker.send("AUTH carol carol-password").status.hasPrefix("-ERR AUTH too many failed attempts for carol from this address: try again in "))
        }
        // ... but not from another address, and no other user from this one.
        #expect(try server.client(from: "127.0.0.2").send("AUTH carol carol-password").status == "+OK signed in as carol (writer)")
        #expect(try server.client().send("AUTH bob bob-password").status == "+OK signed in as bob (reader)")
        // The lock is logged once, however often it refuses.
        #expect(server.log.components(separatedBy: "AUTH for carol from 127.0.0.1 locked").count == 2)
        #expect(server.log.contains("failed AUTH for carol from 127.0.0.1"))
        // It ends.
        let after = eventually(tries: 60, { (try? attacker.send("AUTH carol carol-password").status) ?? "" }, until: { $0.hasPrefix("+OK") })
        #expect(after == "+OK signed in as carol (writer)")
    }

    /// --proxy-from: a balancer's connections begin with a PROXY header naming the client, whose
    /// address then counts (the loopback rule for AUTH, throttling); from anyone else the line
    /// is an unknown command.
    @Test func aTrustedBalancersHeaderNamesTheClient() throws {
        let server = try serverWithUsers(["--proxy-from", "127.0.0.2"])
        let remote = try server.client(from: "127.0.0.2")
        try remote.write("PROXY TCP4 203.0.113.7 127.0.0.1 50000 7878\r\n")
        #expect(try remote.send("AUTH carol carol-password").status
                == "-ERR AUTH AUTH from another host needs TLS: this server has no TLS configured; the line was not read")
        let local = try server.client(from: "127.0.0.2")
        try local.write("PROXY TCP4 127.0.0.9 127.0.0.1 50001 7878\r\n")
        #expect(try local.send("AUTH carol carol-password").status == "+OK signed in as carol (writer)")
        // A health check's connection names no client.
        let check = try server.client(from: "127.0.0.2")
        try check.write("PROXY UNKNOWN\r\n")
        #expect(try check.send("PING").ok)
        // Not the balancer: a client cannot claim another address.
        let spoofer = try server.client()
        #expect(try spoofer.send("PROXY TCP4 127.0.0.9 127.0.0.1 50002 7878").status.hasPrefix("-ERR"))
        #expect(try spoofer.send("AUTH carol guess").status == "-ERR AUTH invalid user name or password")
        #expect(server.log.contains("failed AUTH for carol from 127.0.0.1"))
        // The balancer without a header: misconfigured, refused and closed.
        let bare = try server.client(from: "127.0.0.2")
        #expect(try bare.send("PING").status == "-ERR SYNTAX expected a PROXY protocol v1 header from this balancer (--proxy-from): not a PROXY protocol v1 header")
        #expect(try bare.readToEnd() == [])
        // Nor does a first line the framer refuses (not text) leave the header still to come.
        let garbled = try server.client(from: "127.0.0.2")
        try garbled.writeBytes([0, 0xFF, 0x0A] + Array("PROXY TCP4 127.0.0.9 127.0.0.1 50003 7878\r\n".utf8))
        #expect(try garbled.readReply().status == "-ERR SYNTAX expected a PROXY protocol v1 header from this balancer (--proxy-from): not a PROXY protocol v1 header")
        #expect(try garbled.readToEnd() == [])
    }

    @Test func parallelGuessesAreCountedLikeSerialOnes() throws {
        let server = try serverWithUsers(["--auth-delay", "0.1", "--auth-lock-after", "5", "--pool-size", "4"])
        // 40 connections from one address guess root's password at the same moment.
        let guessers = try (0..<40).map { _ in try server.client() }
        for (index, client) in guessers.enumerated() { try client.write("AUTH root guess-\(index)\n") }
        let answers = try guessers.map { try $0.readReply().status }
        // Attempts being checked count against the failures left: five checked, the rest told
        // to wait; the five failures lock root at this address.
        #expect(answers.filter { $0 == "-ERR AUTH invalid user name or password" }.count == 5)
        #expect(answers.filter { $0.hasPrefix("-ERR UNAVAILABLE other sign-ins as root from this address are being checked") }.count == 35)
        #expect(try server.client().send("AUTH root root-password").status.hasPrefix("-ERR AUTH too many failed attempts for root"))
        // The real admin, from another address, is not locked out.
        #expect(try server.client(from: "127.0.0.2").send("AUTH root root-password").status == "+OK signed in as root (admin)")
    }

    @Test func rightPasswordsInParallelNeverLock() throws {
        let server = try serverWithUsers(["--auth-lock-after", "5", "--pool-size", "4"])
        // A program opens eight connections as one user at once: none is locked out.
        let clients = try (0..<8).map { _ in try server.client() }
        for client in clients { try client.write("AUTH carol carol-password\n") }
        let answers = try clients.map { try $0.readReply().status }
        #expect(answers.allSatisfy { $0 == "+OK signed in as carol (writer)" || $0.hasPrefix("-ERR UNAVAILABLE other sign-ins as carol") }, "\(answers)")
        #expect(answers.filter { $0.hasPrefix("+OK") }.count >= 5)
        #expect(try server.client().send("AUTH carol carol-password").status == "+OK signed in as carol (writer)")
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
        let server = try TestServer(databaseURL: url, arguments: ["--listen", "0.0.0.0:0", "--insecure-no-tls"])
        let client = try server.client()
        #expect(client.banner.contains("authentication required"))
        #expect(try client.send("AUTH eve eve-password-123").status == "+OK signed in as eve (writer)")
        let missingRole = try runRecordsd(["user", "add", "x", "--database", url, "--migrations", TestEnvironment.migrations], input: "long-enough-1\n")
        #expect(missingRole.status == 2)
        #expect(missingRole.error.contains("user add needs --role reader|writer|admin"))
        #expect(try runRecordsd(["user", "remove", "eve", "--database", url, "--migrations", TestEnvironment.migrations]).status == 0)
    }

    @Test func secretsNeverShownAndTheLogCannotBeForged() throws {
        // The test cluster trusts every connection: the passwords are carried, never needed.
        let base = try TestEnvironment.freshDatabase()
        let url = base + (base.contains("?") ? "&" : "?") + "password=TopSecret123"
        let server = try TestServer(databaseURL: url)
        let client = try server.client()
        let info = try client.send("INFO").lines.joined(separator: "\n")
        #expect(!info.contains("TopSecret123"))
        #expect(info.contains("password=***"))
        // The key=value form, with a quoted password holding a space.
        let parts = URLComponents(string: base)!
        let conninfo = "host=\(parts.host!) port=\(parts.port!) dbname=\(parts.path.dropFirst()) user=\(parts.user!) password='Top Secret789'"
        let other = try TestServer(databaseURL: conninfo)
        let otherInfo = try other.client().send("INFO").lines.joined(separator: "\n")
        #expect(!otherInfo.contains("Secret789") && !otherInfo.contains("Top Secret"))
        // A client's line break cannot start a line of its own in the log.
        let forger = try server.client()
        _ = try forger.send("AUTH \"x\\n2026-11-30T00:00:00.000Z INFO s1 signed in as admin (admin) from 10.0.0.1\" password")
        usleep(200_000)
        for log in [server.log, other.log] {
            #expect(!log.contains("TopSecret123") && !log.contains("Secret789"))
            #expect(!log.split(separator: "\n").contains { $0.hasPrefix("2026-11-30T00:00:00.000Z") })
        }
    }

    @Test func strangersCannotHoldSessionSlotsOrLongPasswords() throws {
        let server = try serverWithUsers(["--sign-in-timeout", "1", "--max-sessions", "3"])
        let strangers = try (0..<3).map { _ in try server.client() }
        // The slots are free again once the strangers are told why and closed.
        for stranger in strangers {
            #expect(try stranger.readLine() == "! sign-in timed out: no AUTH within 1s")
            #expect(try stranger.readLine() == nil)
        }
        let member = try server.client()
        #expect(try member.send("AUTH root root-password").status == "+OK signed in as root (admin)")
        usleep(1_500_000)
        #expect(try member.send("PING").status == "+OK PONG")  // signed in: never timed out
        // bcrypt reads 72 bytes: a longer password is refused rather than cut.
        let long = String(repeating: "a", count: 73)
        #expect(try member.send("USER ADD longpw reader \"\(long)\"").status == "-ERR VALIDATION passwords have at most 72 bytes")
        // A SAVE KEY is one word: a policy after it is not part of it.
        #expect(try member.send("SAVE KEY k FORCE").status == "-ERR SYNTAX a SAVE KEY is one word or one quoted string, last on the line (SAVE FORCE KEY k)")
        #expect(try member.send("SAVE FORCE KEY k").ok)
    }
}
