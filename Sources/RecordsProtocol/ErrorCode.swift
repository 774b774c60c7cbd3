/// The stable words after `-ERR`: clients match on them, so they never change.
public enum ErrorCode: String, Sendable, CaseIterable, Codable {
    case syntax = "SYNTAX"
    case unknown = "UNKNOWN"
    case notFound = "NOT_FOUND"
    case validation = "VALIDATION"
    case conflict = "CONFLICT"
    case denied = "DENIED"
    case auth = "AUTH"
    case forbidden = "FORBIDDEN"
    case limit = "LIMIT"
    case unavailable = "UNAVAILABLE"
    /// `SAVE KEY k` whose key a save of other changes used, and committed: that save is done
    /// (its reply's lines and counts come with the error); nothing was saved now.
    case alreadySaved = "ALREADY_SAVED"
    /// The command was stopped by a CANCEL from the client (another connection): what it
    /// would have changed was not saved; the unit of work is as it was before it.
    case cancelled = "CANCELLED"
    case `internal` = "INTERNAL"
}

/// A failed command: the status line's code and message, plus data lines with the details
/// (one problem a line, e.g. every validation failure of a unit).
public struct CommandError: Error, Equatable, Sendable {
    public var code: ErrorCode
    public var message: String
    public var details: [String]
    /// The details as FORMAT JSON shows them (one object a line), when there is such a form.
    public var jsonDetails: [String]?

    public init(_ code: ErrorCode, _ message: String, details: [String] = [], jsonDetails: [String]? = nil) {
        self.code = code
        self.message = message
        self.details = details
        self.jsonDetails = jsonDetails
    }

    public var reply: Reply {
        var reply = Reply(lines: details, status: .error(code, message))
        reply.jsonLines = jsonDetails
        return reply
    }
}
