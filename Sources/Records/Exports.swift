/// The protocol's types (replies, error codes, values, the framer, notices) are part of what
/// Records speaks: whoever imports Records has them.
@_exported import RecordsProtocol
