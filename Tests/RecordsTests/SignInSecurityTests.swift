import Testing
@testable import Records

/// Who may send a password how: decided before the line is parsed, without a database.
@Suite struct SignInSecurityTests {
    private func session(peer: String, secure: Bool = false, security: ServerContext.Security = .init()) -> Session {
        let context = ServerContext(model: SampleModel.model, databaseDescription: "test", authenticationRequired: true, security: security)
        let session = Session(id: 1, context: context, peer: peer)
        session.secure = secure
        return session
    }

    private func status(_ step: Session.Step) -> String {
        if case .reply(let reply) = step { return reply.statusLine }
        return "(not a reply)"
    }

    @Test func loopbackAddresses() {
        for host in ["127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1", "localhost"] { #expect(Session.isLoopback(host), "\(host)") }
        for host in ["10.0.0.5", "192.168.1.1", "::ffff:10.0.0.1", "2001:db8::1", "128.0.0.1", "?"] { #expect(!Session.isLoopback(host), "\(host)") }
    }

    @Test func aPasswordFromAnotherHostIsRefusedInClear() {
        var security = ServerContext.Security()
        security.tlsAvailable = true
        let remote = session(peer: "10.0.0.5", security: security)
        #expect(status(remote.handle("AUTH bob \"secret\"")) == "-ERR AUTH AUTH from another host needs TLS: send STARTTLS first, or connect to the TLS port; the line was not read")
        #expect(status(remote.handle("user add eve writer pw")) == "-ERR AUTH USER from another host needs TLS: send STARTTLS first, or connect to the TLS port; the line was not read")
        // Without TLS configured, the reply says so.
        #expect(status(session(peer: "10.0.0.5").handle("AUTH bob x")) == "-ERR AUTH AUTH from another host needs TLS: this server has no TLS configured; the line was not read")
    }

    @Test func overTLSOrOnLoopbackOrWhenWaivedItIsRead() {
        // These reach the password check (which needs PostgreSQL): not refused for TLS.
        let refusal = "needs TLS"
        #expect(!status(session(peer: "10.0.0.5", secure: true).handle("AUTH bob x")).contains(refusal))
        #expect(!status(session(peer: "127.0.0.1").handle("AUTH bob x")).contains(refusal))
        var waived = ServerContext.Security()
        waived.remoteAuthNeedsTLS = false
        #expect(!status(session(peer: "10.0.0.5", security: waived).handle("AUTH bob x")).contains(refusal))
    }
}
