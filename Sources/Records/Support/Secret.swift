/// Secrets a client must show: made from the system's CSPRNG (getrandom(2)), compared in time
/// that does not depend on where a guess goes wrong. RESUME tokens, cancel keys and the admin
/// token use these.
public enum Secret {
    /// 128 random bits as 32 lowercase hex digits.
    public static func hex128() -> String {
        var generator = SystemRandomNumberGenerator()
        var bytes: [UInt8] = []
        for _ in 0..<2 { withUnsafeBytes(of: (generator.next() as UInt64).bigEndian) { bytes += $0 } }
        return Hex.lowercase(bytes)
    }

    /// Whether `given` is `known`, byte for byte.
    public static func equal(_ known: some Collection<UInt8>, _ given: some Collection<UInt8>) -> Bool {
        guard known.count == given.count else { return false }
        return zip(known, given).reduce(UInt8(0)) { $0 | ($1.0 ^ $1.1) } == 0
    }
}
