#if canImport(Glibc)
import Glibc
#endif
import Foundation
import Testing
import Postgres
import TLS

/// A throwaway CA and certificates made with `openssl` for this run.
final class TestCertificates: Sendable {
    let directory: String
    var ca: String { directory + "/ca.pem" }
    var otherCA: String { directory + "/other-ca.pem" }
    /// For `localhost` and 127.0.0.1, signed by `ca`.
    var cert: String { directory + "/server.pem" }
    var key: String { directory + "/server.key" }
    /// For `elsewhere.example` only, signed by `ca`.
    var wrongNameCert: String { directory + "/wrong.pem" }
    var wrongNameKey: String { directory + "/wrong.key" }
    /// For `localhost`, signed by `otherCA`.
    var otherCert: String { directory + "/other.pem" }
    var otherKey: String { directory + "/other.key" }

    init() throws {
        directory = NSTemporaryDirectory() + "recordsd-tls-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try Self.openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", directory + "/ca.key", "-out", directory + "/ca.pem",
                          "-days", "2", "-subj", "/CN=recordsd test CA"])
        try Self.openssl(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", directory + "/other-ca.key", "-out", directory + "/other-ca.pem",
                          "-days", "2", "-subj", "/CN=another CA"])
        try issue("server", names: "DNS:localhost,IP:127.0.0.1", by: "ca")
        try issue("wrong", names: "DNS:elsewhere.example", by: "ca")
        try issue("other", names: "DNS:localhost,IP:127.0.0.1", by: "other-ca")
    }

    private func issue(_ name: String, names: String, by ca: String) throws {
        let base = directory + "/" + name
        try Self.openssl(["req", "-newkey", "rsa:2048", "-nodes", "-keyout", base + ".key", "-out", base + ".csr", "-subj", "/CN=\(name)"])
        try "subjectAltName=\(names)\n".write(toFile: base + ".ext", atomically: true, encoding: .utf8)
        try Self.openssl(["x509", "-req", "-in", base + ".csr", "-CA", directory + "/\(ca).pem", "-CAkey", directory + "/\(ca).key",
                          "-CAcreateserial", "-out", base + ".pem", "-days", "2", "-extfile", base + ".ext"])
    }

    static func openssl(_ arguments: [String], input: String? = nil) throws {
        let result = try runProcess("/usr/bin/openssl", arguments, input: input)
        guard result.status == 0 else { throw TestFailure("openssl \(arguments.joined(separator: " ")): \(result.error)") }
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }
}

@Suite struct TLSTests {
    let certificates: TestCertificates

    init() throws {
        certificates = try TestCertificates()
    }

    private func server(_ extra: [String] = []) throws -> TestServer {
        try TestServer(arguments: ["--tls-cert", certificates.cert, "--tls-key", certificates.key, "--tls-listen", "127.0.0.1:0"] + extra)
    }

    @Test func opensslSpeaksToTheTLSListener() throws {
        let server = try server()
        let result = try runProcess("/usr/bin/openssl", ["s_client", "-connect", "127.0.0.1:\(server.tlsPort)", "-CAfile", certificates.ca,
                                                         "-verify_hostname", "localhost", "-verify_return_error", "-quiet"],
                                    input: "PING\nCOUNT game\nQUIT\n")
        #expect(result.output.contains("+OK recordsd 0.1.0 ready"))
        #expect(result.output.contains("+OK PONG\n+OK 0\n+OK bye"), "\(result.output) \(result.error)")
        // Another CA's client does not trust it.
        let stranger = try runProcess("/usr/bin/openssl", ["s_client", "-connect", "127.0.0.1:\(server.tlsPort)", "-CAfile", certificates.otherCA,
                                                           "-verify_return_error", "-quiet"], input: "PING\n")
        #expect(!stranger.output.contains("+OK PONG"))
        #expect(stranger.error.contains("verify error") || stranger.error.contains("certificate verify failed"), "\(stranger.error)")
    }

    @Test func startTLSDropsWhatWasSentInClearBehindIt() throws {
        let server = try server()
        // A man in the middle appends a command behind STARTTLS: it must not run as the client's.
        let client = try server.client()
        try client.startTLS(ca: certificates.ca, behind: "PING injected\n")
        #expect(try client.send("PING inside").status == "+OK inside")
        #expect(try client.send("STARTTLS").status == "-ERR DENIED this connection already uses TLS")
        // Pipelined and streamed replies over TLS: 2,000 records, then the next command.
        let db = try server.database()
        try db.execute("INSERT INTO game (name) SELECT 'g' || i FROM generate_series(1, 2000) i")
        try client.write("COUNT game\nFIND game\nPING after\n")
        #expect(try client.readLine() == "+OK 2000")
        var records = 0
        while try client.readLine()?.hasPrefix("{") == true { records += 1 }
        #expect(records == 2000)
        #expect(try client.readLine() == "+OK after")
    }

    @Test func theCLISpeaksTLSAndChecksTheServersName() throws {
        let server = try server()
        let records = CLITests.binary
        let startTLS = try runProcess(records, ["-H", "localhost", "-p", "\(server.port)", "--tls", "--tls-ca", certificates.ca, "-c", "PING"])
        #expect(startTLS.status == 0, "\(startTLS.error)")
        #expect(startTLS.output == "PONG\n")
        let direct = try runProcess(records, ["-c", "PING"], environment: ["RECORDS_URL": "recordss://localhost:\(server.tlsPort)",
                                                                           "RECORDS_TLS_CA": certificates.ca])
        #expect(direct.output == "PONG\n", "\(direct.error)")
        // Without the CA, the certificate is not trusted: no session.
        let untrusted = try runProcess(records, ["-H", "localhost", "-p", "\(server.tlsPort)", "--tls-direct", "-c", "PING"])
        #expect(untrusted.status == 3)
        #expect(untrusted.error.contains("certificate verify failed"), "\(untrusted.error)")
        // A certificate for another name is refused.
        let impostor = try TestServer(arguments: ["--tls-cert", certificates.wrongNameCert, "--tls-key", certificates.wrongNameKey])
        let wrongName = try runProcess(records, ["-H", "localhost", "-p", "\(impostor.port)", "--tls", "--tls-ca", certificates.ca, "-c", "PING"])
        #expect(wrongName.status == 3)
        #expect(wrongName.error.contains("TLS with localhost failed"), "\(wrongName.error)")
    }

    @Test func sighupReloadsTheCertificate() throws {
        // The server reads its certificate from files an operator replaces.
        let cert = certificates.directory + "/live.pem", key = certificates.directory + "/live.key"
        try FileManager.default.copyItem(atPath: certificates.cert, toPath: cert)
        try FileManager.default.copyItem(atPath: certificates.key, toPath: key)
        let server = try TestServer(arguments: ["--tls-cert", cert, "--tls-key", key, "--tls-listen", "127.0.0.1:0"])
        #expect(try LineClient(port: server.tlsPort, directTLS: certificates.ca).send("PING").status == "+OK PONG")
        try FileManager.default.removeItem(atPath: cert)
        try FileManager.default.removeItem(atPath: key)
        try FileManager.default.copyItem(atPath: certificates.otherCert, toPath: cert)
        try FileManager.default.copyItem(atPath: certificates.otherKey, toPath: key)
        kill(server.process.processIdentifier, SIGHUP)
        let reloaded = eventually(tries: 100, { server.log.contains("TLS certificate reloaded") }, until: { $0 })
        #expect(reloaded)
        #expect(try LineClient(port: server.tlsPort, directTLS: certificates.otherCA).send("PING").status == "+OK PONG")
        #expect(throws: (any Error).self) { try LineClient(port: server.tlsPort, directTLS: certificates.ca) }
        // A broken file keeps the current certificate.
        try "not a certificate".write(toFile: cert, atomically: true, encoding: .utf8)
        kill(server.process.processIdentifier, SIGHUP)
        let kept = eventually(tries: 100, { server.log.contains("TLS certificate not reloaded, the current one stays") }, until: { $0 })
        #expect(kept)
        let plain = try server.client()
        try plain.startTLS(ca: certificates.otherCA)
        #expect(try plain.send("PING").status == "+OK PONG")
    }

    @Test func startTLSWithoutACertificateIsRefused() throws {
        let server = try TestServer()
        let client = try server.client()
        #expect(try client.send("STARTTLS").status == "-ERR DENIED TLS is not configured on this server (--tls-cert, --tls-key)")
        #expect(try client.send("PING").status == "+OK PONG")
    }
}

/// recordsd reaching PostgreSQL over TLS, as libpq's parameters in `--database` ask.
@Suite struct PostgresTLSTests {
    @Test func sslmodeVerifyFullIsHonoured() throws {
        // scripts/test starts PostgreSQL with ssl=on and a certificate of its own CA.
        guard let ca = TestEnvironment.environment["RECORDS_TEST_PG_CA"] else {
            Issue.record("RECORDS_TEST_PG_CA is not set: run through scripts/test")
            return
        }
        var url = URLComponents(string: try TestEnvironment.freshDatabase())!
        url.host = "localhost"
        url.queryItems = [URLQueryItem(name: "sslmode", value: "verify-full"), URLQueryItem(name: "sslrootcert", value: ca)]
        let server = try TestServer(databaseURL: url.string!)
        let client = try server.client()
        #expect(try client.send("COUNT game").status == "+OK 0")
        let db = try Connection(url.string!)
        #expect(try db.query("SELECT bool_and(ssl) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid) WHERE application_name = 'recordsd'").string(0, 0) == "t")
        // A CA that did not sign PostgreSQL's certificate: recordsd does not start.
        let certificates = try TestCertificates()
        url.queryItems = [URLQueryItem(name: "sslmode", value: "verify-full"), URLQueryItem(name: "sslrootcert", value: certificates.otherCA)]
        let refused = try runRecordsd(["migrate", "--database", url.string!, "--migrations", TestEnvironment.migrations])
        #expect(refused.status != 0)
        #expect(refused.error.contains("certificate verify failed"), "\(refused.error)")
    }
}
