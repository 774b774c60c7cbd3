/// Every line the server pushes on its own (`! kind text`), between replies: one table that the
/// server writes from and the client and CLI read with. Change events (`! change ...`) are
/// WATCH's and are written where changes are rendered.
public enum Notice: Equatable, Sendable {
    /// WATCH lines dropped for a session that fell behind.
    case overflow(dropped: Int)
    /// The session's user was removed or changed: it is signed out (the reason follows).
    case signedOut(String)
    /// The server is stopping; `lost` names what could not be handed off, if anything.
    case shutdown(lost: Int?)
    /// The session's state is kept under `token` for `ttl` seconds: RESUME it on any server.
    case handOff(token: String, pending: Int, ttl: Int)
    /// --durable-units: the session's state could not be written.
    case durableFailed
    /// Closed after `seconds` without a request.
    case idle(seconds: Int)
    /// Closed: it had to sign in within `seconds` and did not.
    case signInTimeout(seconds: Int)
    /// An operator ended the session (`recordsd sessions kill`).
    case ended

    /// The first word after `! `.
    public var kind: String {
        switch self {
        case .overflow: "overflow"
        case .signedOut: "signed-out"
        case .shutdown: "shutdown"
        case .handOff: "handoff"
        case .durableFailed: "durable:"
        case .idle: "idle"
        case .signInTimeout: "sign-in"
        case .ended: "ended"
        }
    }

    /// The line after `! `.
    public var text: String {
        switch self {
        case .overflow(let dropped): "overflow \(dropped) events dropped"
        case .signedOut(let reason): "signed-out " + reason
        case .shutdown(nil): "shutdown recordsd is stopping"
        case .shutdown(let lost?):
            "shutdown recordsd is stopping; this session could not be handed off (PostgreSQL could not store it): its \(lost) pending change(s) and its watches are lost"
        case .handOff(let token, let pending, let ttl):
            "handoff \(token) (\(pending) pending change(s)): RESUME \(token) on any server within \(ttl) s restores this session"
        case .durableFailed: "durable: this session's state could not be written to PostgreSQL; a server crash now would lose its pending changes"
        case .idle(let seconds): "idle session closed after \(seconds)s without a request"
        case .signInTimeout(let seconds): "sign-in timed out: no AUTH within \(seconds)s"
        case .ended: "ended an operator ended this session"
        }
    }

    /// What a client must do about a pushed line (`text` without `! `), by its first word.
    public enum Kind: Equatable, Sendable {
        /// A WATCH event or an overflow: data for the application.
        case event
        /// The session is over on this server (shutdown, signed out, idle, sign-in timeout, ended).
        case sessionEnds
        /// A hand-off token (`handoff TOKEN ...`).
        case handOff(token: String)
        /// Informational (durable write failed).
        case warning
    }

    /// Whether a pushed line (`text` without `! `) says the session's kept copy is not what
    /// the client was told: a state write that failed (--durable-units: the copy is older than
    /// the replies since), or a shutdown that could not hand the session off. A token taken
    /// before it must not be RESUMEd: that would bring back an older unit in silence. A later
    /// `handoff` notice (the state written again) makes its token good.
    public static func revokesHandOff(_ text: String) -> Bool {
        text == Notice.durableFailed.text || text.hasPrefix(Notice.shutdown(lost: nil).kind + " ") && text != Notice.shutdown(lost: nil).text
    }

    public static func kind(of text: String) -> Kind {
        let words = text.split(separator: " ", maxSplits: 2)
        switch words.first {
        case "handoff" where words.count >= 2: return .handOff(token: String(words[1]))
        case "shutdown", "signed-out", "idle", "sign-in", "ended": return .sessionEnds
        case "durable:": return .warning
        default: return .event
        }
    }
}
