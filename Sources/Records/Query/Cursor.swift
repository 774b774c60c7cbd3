import Foundation

/// What seals cursors: the server gives one at start (the keys of `--cursor-secret-file`, or a
/// random key of its own). A sealed cursor can be neither read nor changed by a client, and
/// `associated` (the user it was given to) must match for it to open.
public protocol CursorSealing: AnyObject, Sendable {
    func seal(_ plain: [UInt8], associated: [UInt8]) -> [UInt8]
    func open(_ sealed: [UInt8], associated: [UInt8]) -> [UInt8]?
}

/// No sealing: for a ServerContext made without a server around it (unit tests). `recordsd`
/// always installs real keys.
public final class UnsealedCursors: CursorSealing {
    public init() {}
    public func seal(_ plain: [UInt8], associated: [UInt8]) -> [UInt8] { plain }
    public func open(_ sealed: [UInt8], associated: [UInt8]) -> [UInt8]? { sealed }
}

/// Keyset cursors: the last row's sort-key values and the query's fingerprint, as one opaque
/// word (`c` + hex of a JSON array, sealed) that the client passes back with AFTER. JSON holds any text
/// a key may hold, so no value can break a cursor. What a client sees is that word sealed
/// (`sealed`/`opened`): the values are the client's own rows, but a cursor made or changed by
/// hand would page from a position no query gave, and a user's cursor is not another's.
enum Cursor {
    /// The cursor's bytes before sealing: a JSON array of the fingerprint and the values.
    static func plain(_ values: [String?], fingerprint: String) -> [UInt8] {
        let array: [Any] = [fingerprint] + values.map { $0.map { $0 as Any } ?? NSNull() }
        return Array((try? JSONSerialization.data(withJSONObject: array)) ?? Data())
    }

    static func decode(_ token: String, fingerprint: String, count: Int) throws(CommandError) -> [String?] {
        let invalid = CommandError(.validation, "AFTER: this cursor does not belong to this query (pass the one the previous page of the same FIND gave)")
        guard let bytes = unhex(token) else { throw invalid }
        guard let array = (try? JSONSerialization.jsonObject(with: Data(bytes))) as? [Any], array.count == count + 1,
              array[0] as? String == fingerprint else { throw invalid }
        var values: [String?] = []
        for item in array.dropFirst() {
            if item is NSNull { values.append(nil) } else if let text = item as? String { values.append(text) } else { throw invalid }
        }
        return values
    }

    /// The word a client is given for the page that ended at `values`, for `user`.
    static func sealed(_ values: [String?], fingerprint: String, by keys: any CursorSealing, user: String?) -> String {
        "c" + Hex.lowercase(keys.seal(plain(values, fingerprint: fingerprint), associated: Array((user ?? "").utf8)))
    }

    /// The plain cursor (`c` and the hex of `plain`'s bytes, as `decode` reads it) a client's
    /// word holds, when these keys sealed it for `user`.
    static func opened(_ token: String, by keys: any CursorSealing, user: String?) throws(CommandError) -> String {
        guard let bytes = unhex(token), let plain = keys.open(bytes, associated: Array((user ?? "").utf8)) else {
            throw CommandError(.validation, "AFTER: this cursor was not given to this session's user by this server's keys, or was changed (pass the one the previous page gave)")
        }
        return "c" + Hex.lowercase(plain)
    }

    /// `request` with its AFTER opened.
    static func opened(_ request: FetchRequest, by keys: any CursorSealing, user: String?) throws(CommandError) -> FetchRequest {
        guard let token = request.after else { return request }
        var opened = request
        opened.after = try Self.opened(token, by: keys, user: user)
        return opened
    }

    private static func unhex(_ token: String) -> [UInt8]? {
        guard token.hasPrefix("c"), token.utf8.count < 1 << 20 else { return nil }
        return Hex.decode(token.dropFirst())
    }
}
