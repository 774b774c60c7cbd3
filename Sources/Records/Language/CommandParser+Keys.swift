import RecordsProtocol

// MARK: - Verbs that take a key as typed: SAVE [...] KEY k, RESUME token

extension CommandParser {
    /// `SAVE [FORCE|THEIRS|MERGE] [KEY k]`, read word by word rather than tokenized: a key is
    /// what the client made (`KeyToken`), which the request language's lexer would refuse
    /// (`6f1c0d52-order-17` starts like a number).
    static func parseSave(_ line: String) throws(CommandError) -> Command {
        var words = LineWords(line)
        _ = words.next()  // SAVE
        var policy = MergePolicy.fail
        var word = words.next()
        if let policyWord = word, !policyWord.is("KEY") {
            switch String(policyWord.text).asciiUppercased {
            case "FORCE": policy = .force
            case "THEIRS": policy = .theirs
            case "MERGE": policy = .merge
            default:
                throw CommandError(.syntax, "SAVE takes FORCE, THEIRS or MERGE, then KEY k, not '\(policyWord.text.prefix(60))'")
            }
            word = words.next()
        }
        guard let keyWord = word else { return .save(policy, key: nil) }
        guard keyWord.is("KEY") else {
            throw CommandError(.syntax, "at \(words.column(of: keyWord)): expected KEY k or the end of the line, found '\(keyWord.text.prefix(60))'")
        }
        let key = try words.key(what: "a SAVE KEY")
        guard words.next() == nil else {
            // `SAVE KEY k FORCE` is not the key "k FORCE": the policy goes first.
            throw CommandError(.syntax, "a SAVE KEY is one word or one quoted string, last on the line (SAVE FORCE KEY k)")
        }
        return .save(policy, key: key)
    }

    /// `RESUME token`: the token as the handoff notice gave it (or quoted).
    static func parseResume(_ line: String) throws(CommandError) -> Command {
        var words = LineWords(line)
        _ = words.next()  // RESUME
        let token = try words.key(what: "the resume token of a handoff notice")
        if let extra = words.next() {
            throw CommandError(.syntax, "at \(words.column(of: extra)): expected the end of the line after the token, found '\(extra.text.prefix(60))'")
        }
        return .resume(token: token)
    }

    /// `CANCEL KEY`, or `CANCEL s12 9f3a...` (the key CANCEL KEY gave session s12).
    static func parseCancel(_ line: String) throws(CommandError) -> Command {
        var words = LineWords(line)
        _ = words.next()  // CANCEL
        guard let first = words.next() else { throw CommandError(.syntax, "CANCEL KEY, or CANCEL session key (CANCEL KEY gives both)") }
        let command: Command
        if first.is("KEY") {
            command = .cancel(session: nil, key: nil)
        } else {
            guard first.text.first == "s" || first.text.first == "S", let id = Int(first.text.dropFirst()), id >= 0 else {
                throw CommandError(.syntax, "at \(words.column(of: first)): expected a session such as s12 (CANCEL KEY gives it), found '\(first.text.prefix(60))'")
            }
            command = .cancel(session: id, key: try words.key(what: "the session's cancel key"))
        }
        if let extra = words.next() {
            throw CommandError(.syntax, "at \(words.column(of: extra)): expected the end of the line, found '\(extra.text.prefix(60))'")
        }
        return command
    }
}

/// A line's words, split at spaces and tabs, each with its byte offset (for an error's column).
struct LineWords {
    struct Word: Equatable {
        var text: Substring
        var offset: Int
        func `is`(_ keyword: String) -> Bool { String(text).asciiUppercased == keyword }
    }

    let line: String
    private let bytes: [UInt8]
    private var position = 0

    init(_ line: String) {
        self.line = line
        bytes = Array(line.utf8)
    }

    private mutating func skipBlanks() {
        while position < bytes.count, bytes[position] == 32 || bytes[position] == 9 { position += 1 }
    }

    mutating func next() -> Word? {
        skipBlanks()
        guard position < bytes.count else { return nil }
        let start = position
        while position < bytes.count, bytes[position] != 32, bytes[position] != 9 { position += 1 }
        return Word(text: Substring(decoding: bytes[start..<position], as: UTF8.self), offset: start)
    }

    func column(of word: Word) -> Int { Lexer.column(of: word.offset, in: line) }

    /// A key next: one quoted string (with the request language's escapes), or a word of
    /// `KeyToken`'s bytes.
    mutating func key(what: String) throws(CommandError) -> String {
        skipBlanks()
        guard position < bytes.count else { throw CommandError(.syntax, "expected \(what): \(KeyToken.grammar)") }
        let start = position
        let key: String
        if bytes[start] == UInt8(ascii: "\"") || bytes[start] == UInt8(ascii: "'") {
            // The request language's string, with its escapes and its errors' columns.
            var lexer = Lexer(line)
            lexer.position = start
            guard case .string(let text) = try lexer.next().kind else {
                throw CommandError(.syntax, "at \(Lexer.column(of: start, in: line)): expected \(what)")
            }
            position = lexer.position
            key = text
        } else {
            guard let word = next() else { throw CommandError(.syntax, "expected \(what): \(KeyToken.grammar)") }
            if let bad = word.text.utf8.firstIndex(where: { !KeyToken.isKeyByte($0) }) {
                let at = word.offset + word.text.utf8.distance(from: word.text.utf8.startIndex, to: bad)
                throw CommandError(.syntax, "at \(Lexer.column(of: at, in: line)): \(what) is \(KeyToken.grammar)")
            }
            key = String(word.text)
        }
        guard !key.isEmpty, key.utf8.count <= KeyToken.maxBytes else {
            throw CommandError(.syntax, "\(what) is 1 to \(KeyToken.maxBytes) bytes")
        }
        return key
    }
}
