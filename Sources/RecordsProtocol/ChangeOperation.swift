/// What a committed change did to a record, as WATCH pushes it (`! employee 42 inserted`):
/// the last word of a change line, written by the server and read by the client and CLI.
public enum ChangeOperation: String, Sendable, CaseIterable, Codable {
    case inserted, updated, deleted
}
