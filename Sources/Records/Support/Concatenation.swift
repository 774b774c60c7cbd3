extension String {
    /// `parts` end to end, in one allocation: what an interpolation builds, without its cost a
    /// segment (the reply to every INSERT line is built so).
    static func concatenating(_ parts: String...) -> String {
        var count = 0
        for part in parts { count += part.utf8.count }
        return String(unsafeUninitializedCapacity: count) { buffer in
            var at = 0
            for var part in parts {
                part.withUTF8 { bytes in
                    guard let source = bytes.baseAddress, let target = buffer.baseAddress else { return }
                    (target + at).update(from: source, count: bytes.count)
                    at += bytes.count
                }
            }
            return at
        }
    }
}
