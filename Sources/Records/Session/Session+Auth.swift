import Postgres

// MARK: - AUTH, USER

extension Session {
    func authenticate(_ name: String, password: String, model: Model) -> Step {
        let throttle = context.throttle
        let wait = throttle.wait(user: name, address: peer)
        if wait > 0 {
            return .reply(.error(.auth, "too many failed attempts: try again in \(Int(wait.rounded(.up))) s"))
        }
        return database(model) { [self] connection in
            guard let role = try Users.verify(name, password: password, connection) else {
                throttle.failed(user: name, address: peer)
                Log.warning("failed AUTH for \(name) from \(peer)", session: id)
                // Never says whether the user exists.
                return .error(.auth, "invalid user name or password")
            }
            throttle.succeeded(user: name, address: peer)
            user = (name, role)
            Log.info("signed in as \(name) (\(role.name)) from \(peer)", session: id)
            return .ok("signed in as \(name) (\(role.name))")
        }
    }

    func manageUsers(_ command: UserCommand, model: Model) -> Step {
        database(model) { [self] connection in
            do {
                switch command {
                case .list:
                    let accounts = try Users.list(connection)
                    return .ok("\(accounts.count) user(s)", lines: accounts.map { "\($0.name)  \($0.role.name)  created \($0.createdAt)" })
                case .add(let name, let role, let password):
                    try Users.add(name, role: role, password: password, connection)
                    context.authenticationRequired = true
                    Log.info("\(who) added user \(name) (\(role.name))", session: id)
                    return .ok("user \(name) added (\(role.name))")
                case .passwd(let name, let password):
                    try Users.setPassword(name, password: password, connection)
                    Log.info("\(who) changed the password of \(name)", session: id)
                    return .ok("password of \(name) changed")
                case .remove(let name):
                    try Users.remove(name, connection)
                    Log.info("\(who) removed user \(name)", session: id)
                    return .ok("user \(name) removed")
                }
            } catch let error as UserError {
                return .error(.validation, error.description)
            }
        }
    }
}
