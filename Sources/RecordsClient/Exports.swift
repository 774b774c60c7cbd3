// The protocol's tables (error codes, notices, verbs) are part of the client's API: a caller
// switches on `RecordsError.server(code: .unavailable, ...)` without importing the protocol.
@_exported import RecordsProtocol
