import Foundation

/// An HTTP request on the admin listener, read from what a connection sent so far. Pure: the
/// admin loop feeds it bytes and acts on what it finds (`AdminServer`).
struct AdminRequest: Equatable {
    var method: String
    var path: String
    /// HTTP/1.1 keeps the connection unless `Connection: close`; HTTP/1.0 closes it unless
    /// `Connection: keep-alive`.
    var keepAlive: Bool
    /// The `Authorization` header's value.
    var authorization: String? = nil

    /// The request line and headers may hold this much; a longer head is refused (431).
    static let maxHead = 8192

    enum Found: Equatable {
        /// Not all of the head yet.
        case incomplete
        /// A request, and the bytes it used (a pipelined next one may follow).
        case request(AdminRequest, consumed: Int)
        /// Not HTTP, or a head too long: answered with this status, then closed.
        case invalid(status: String)
    }

    /// The first request in `bytes`, if its head (request line and headers) is complete.
    static func parse(_ bytes: ArraySlice<UInt8>) -> Found {
        guard let end = headEnd(bytes) else {
            return bytes.count > maxHead ? .invalid(status: "431 Request Header Fields Too Large") : .incomplete
        }
        guard end - bytes.startIndex <= maxHead else { return .invalid(status: "431 Request Header Fields Too Large") }
        let head = String(decoding: bytes[bytes.startIndex..<end], as: UTF8.self)
        var lines = head.split(separator: "\r\n", omittingEmptySubsequences: false).makeIterator()
        let words = (lines.next() ?? "").split(separator: " ")
        guard words.count == 3, words[2].hasPrefix("HTTP/1.") else { return .invalid(status: "400 Bad Request") }
        var keepAlive = words[2] == "HTTP/1.1"
        var authorization: String?
        while let line = lines.next() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            if line[..<colon].lowercased() == "authorization" {
                authorization = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
            }
            if line[..<colon].lowercased() == "connection" {
                let value = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces).lowercased()
                if value == "close" { keepAlive = false } else if value == "keep-alive" { keepAlive = true }
            }
        }
        // A body (none is expected) is not read: the connection closes after the answer.
        let hasBody = head.lowercased().contains("\r\ncontent-length:") || head.lowercased().contains("\r\ntransfer-encoding:")
        return .request(AdminRequest(method: String(words[0]), path: String(words[1]), keepAlive: keepAlive && !hasBody,
                                     authorization: authorization),
                        consumed: end + 4 - bytes.startIndex)
    }

    /// Where `\r\n\r\n` begins: the end of a request's or a response's head.
    static func headEnd(_ bytes: ArraySlice<UInt8>) -> Int? {
        guard bytes.count >= 4 else { return nil }
        var index = bytes.startIndex
        while index <= bytes.endIndex - 4 {
            if bytes[index] == 13, bytes[index + 1] == 10, bytes[index + 2] == 13, bytes[index + 3] == 10 { return index }
            index += 1
        }
        return nil
    }

    /// The response's bytes.
    static func response(status: String, type: String, body: String, keepAlive: Bool, head: Bool = false) -> [UInt8] {
        let text = "HTTP/1.1 \(status)\r\nContent-Type: \(type)\r\nContent-Length: \(body.utf8.count)\r\n"
            + "Connection: \(keepAlive ? "keep-alive" : "close")\r\n\r\n" + (head ? "" : body)
        return Array(text.utf8)
    }
}
