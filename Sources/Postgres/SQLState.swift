/// A PostgreSQL error code (SQLSTATE), matchable in `catch` and `switch`.
/// See https://www.postgresql.org/docs/15/errcodes-appendix.html
public struct SQLState: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// The two-character class, e.g. "23" for integrity constraint violations.
    public var errorClass: String { String(rawValue.prefix(2)) }

    public static let notNullViolation = SQLState(rawValue: "23502")
    public static let foreignKeyViolation = SQLState(rawValue: "23503")
    public static let uniqueViolation = SQLState(rawValue: "23505")
    public static let checkViolation = SQLState(rawValue: "23514")
    public static let restrictViolation = SQLState(rawValue: "23001")
    /// DROP ... RESTRICT with objects that still depend on what it drops.
    public static let dependentObjectsStillExist = SQLState(rawValue: "2BP01")
    public static let serializationFailure = SQLState(rawValue: "40001")
    public static let deadlockDetected = SQLState(rawValue: "40P01")
    public static let invalidTextRepresentation = SQLState(rawValue: "22P02")
    public static let numericValueOutOfRange = SQLState(rawValue: "22003")
    public static let invalidDatetimeFormat = SQLState(rawValue: "22007")
    public static let datetimeFieldOverflow = SQLState(rawValue: "22008")
    public static let stringDataRightTruncation = SQLState(rawValue: "22001")
    public static let invalidRegularExpression = SQLState(rawValue: "2201B")
    public static let undefinedTable = SQLState(rawValue: "42P01")
    public static let undefinedColumn = SQLState(rawValue: "42703")
    /// A value's type is not the column's (`column "x" is of type integer but expression is
    /// of type text`).
    public static let datatypeMismatch = SQLState(rawValue: "42804")
    /// ON CONFLICT names columns no unique index covers.
    public static let invalidColumnReference = SQLState(rawValue: "42P10")
    public static let adminShutdown = SQLState(rawValue: "57P01")
    public static let cannotConnectNow = SQLState(rawValue: "57P03")
    public static let queryCanceled = SQLState(rawValue: "57014")
    public static let lockNotAvailable = SQLState(rawValue: "55P03")
    public static let undefinedFunction = SQLState(rawValue: "42883")
    public static let raiseException = SQLState(rawValue: "P0001")
    /// A privilege, or a row-level security policy, refused it.
    public static let insufficientPrivilege = SQLState(rawValue: "42501")
    public static let featureNotSupported = SQLState(rawValue: "0A000")

    /// Class 08 (connection exception) and the shutdown codes: the server is not there right now.
    public var meansUnavailable: Bool {
        errorClass == "08" || self == .adminShutdown || self == .cannotConnectNow
            || rawValue == "57P02" || rawValue == "53300"
    }
}
