import Postgres

// MARK: - AUTH, USER

extension Session {
    func authenticate(_ name: String, password: String, model: Model) -> Step {
        // Changes made as one user are never saved as another: a SAVE runs with its user's
        // rights and database role, and the log names who saved.
        if let current = user, current.name != name, unit.heldCount > 0 {
            return .reply(.error(.auth, "this session holds pending changes made as \(current.name): SAVE or ROLLBACK them before signing in as another user"))
        }
        let throttle = context.throttle
        let peer = self.peer
        let session = id
        switch throttle.begin(user: name, address: peer) {
        case .refused(let wait, let first):
            if first { Log.warning("AUTH for \(Log.quoted(name)) from \(peer) locked for \(Int(wait.rounded(.up))) s after repeated failures", session: session) }
            return .reply(.error(.auth, "too many failed attempts for \(name) from this address: try again in \(Int(wait.rounded(.up))) s"))
        case .busy:
            // Not a refusal of the password: UNAVAILABLE tells clients to try again (they do).
            return .reply(.error(.unavailable, "other sign-ins as \(name) from this address are being checked: try again when they are answered"))
        case .allowed:
            break
        }
        return database(model, hold: .signIn) { context in
            guard let grant = try context.retryingOnce({ try Users.verify(name, password: password, context.connection) }) else {
                let delay = throttle.failed(user: name, address: peer)
                Log.warning("failed AUTH for \(Log.quoted(name)) from \(peer)", session: session)
                // Never says whether the user exists; answered after a delay that grows.
                return WorkResult(reply: .error(.auth, "invalid user name or password"), delay: delay)
            }
            throttle.succeeded(user: name, address: peer)
            let role = grant.role
            let as_ = grant.databaseRole.map { ", database role \($0)" } ?? ""
            Log.info("signed in as \(Log.quoted(name)) (\(role.name)\(as_)) from \(peer)", session: session)
            return WorkResult(reply: .ok("signed in as \(name) (\(role.name)\(as_))")) { session in
                // Another user does not inherit the versions this one read (nothing is pending).
                if session.user?.name != name && session.unit.heldCount == 0 { session.unit.rollback() }
                session.user = (name, role)
                session.databaseRole = grant.databaseRole
                session.signedInSince = grant.since
            }
        }
    }

    func manageUsers(_ command: UserCommand, model: Model) -> Step {
        let who = self.who
        let session = id
        let shared = context
        return database(model) { context in
            do {
                switch command {
                case .list:
                    let accounts = try Users.list(context.connection)
                    return WorkResult(reply: .ok("\(accounts.count) user(s)", lines: accounts.map {
                        "\($0.name)  \($0.role.name)  created \($0.createdAt)" + ($0.databaseRole.map { "  database role \($0)" } ?? "")
                    }))
                case .add(let name, let role, let password, let databaseRole):
                    try Users.add(name, role: role, password: password, databaseRole: databaseRole, context.connection)
                    shared.roles = try Users.roles(context.connection)
                    Log.info("\(who) added user \(name) (\(role.name))", session: session)
                    return WorkResult(reply: .ok("user \(name) added (\(role.name))"))
                case .passwd(let name, let password):
                    try Users.setPassword(name, password: password, context.connection)
                    Log.info("\(who) changed the password of \(name)", session: session)
                    return WorkResult(reply: .ok("password of \(name) changed"))
                case .remove(let name):
                    try Users.remove(name, context.connection)
                    shared.roles = try Users.roles(context.connection)
                    Log.info("\(who) removed user \(name)", session: session)
                    return WorkResult(reply: .ok("user \(name) removed"))
                }
            } catch let error as UserError {
                return WorkResult(reply: .error(.validation, error.description))
            }
        }
    }
}
