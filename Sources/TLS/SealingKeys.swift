import CLibSSL
import Foundation

/// Sealed and opened with AES-256-GCM (OpenSSL's EVP), under a ring of keys: the first seals,
/// each one opens, so a key being rotated out keeps working until it leaves the ring. A sealed
/// message is `version (1) | key id (4) | nonce (12) | ciphertext | tag (16)`; `associated`
/// data (who may open it) is authenticated, not carried. Keys are the SHA-256 of the secrets
/// given (lines of a file shared by every replica).
public final class SealingKeys: @unchecked Sendable {  // `ring` guarded by `lock`
    private struct Key { var id: [UInt8]; var bytes: [UInt8] }
    private let lock = NSLock()
    private var ring: [Key]

    public init(secrets: [String]) {
        ring = secrets.map(Self.key)
    }

    /// A key of this process only (random): sealed messages open on no other process.
    public static func random() -> SealingKeys {
        var bytes = [UInt8](repeating: 0, count: 32)
        _ = RAND_bytes(&bytes, 32)
        return SealingKeys(secrets: [bytes.map { String(format: "%02x", $0) }.joined()])
    }

    /// Rotation: a new ring, the sealing key first.
    public func replace(secrets: [String]) {
        let keys = secrets.map(Self.key)
        lock.withLock { ring = keys }
    }

    private static func digest(_ bytes: [UInt8]) -> [UInt8] {
        var out = [UInt8](repeating: 0, count: 32)
        var length: UInt32 = 0
        _ = EVP_Digest(bytes, bytes.count, &out, &length, EVP_sha256(), nil)
        return out
    }

    private static func key(_ secret: String) -> Key {
        let bytes = digest(Array(secret.utf8))
        return Key(id: Array(digest(bytes).prefix(4)), bytes: bytes)
    }

    public func seal(_ plain: [UInt8], associated: [UInt8]) -> [UInt8] {
        guard let key = lock.withLock({ ring.first }) else { return [] }
        var nonce = [UInt8](repeating: 0, count: 12)
        _ = RAND_bytes(&nonce, 12)
        guard let context = EVP_CIPHER_CTX_new() else { return [] }
        defer { EVP_CIPHER_CTX_free(context) }
        var out = [UInt8](repeating: 0, count: plain.count + 16)
        var length: Int32 = 0, total: Int32 = 0
        guard EVP_EncryptInit_ex(context, EVP_aes_256_gcm(), nil, key.bytes, nonce) == 1,
              EVP_EncryptUpdate(context, nil, &length, associated, Int32(associated.count)) == 1,
              EVP_EncryptUpdate(context, &out, &length, plain, Int32(plain.count)) == 1 else { return [] }
        total = length
        guard out.withUnsafeMutableBufferPointer({ EVP_EncryptFinal_ex(context, $0.baseAddress! + Int(total), &length) }) == 1 else { return [] }
        total += length
        var tag = [UInt8](repeating: 0, count: 16)
        guard EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_GET_TAG, 16, &tag) == 1 else { return [] }
        return [1] + key.id + nonce + out.prefix(Int(total)) + tag
    }

    /// The message, or nil when no key of the ring made it or it was changed.
    public func open(_ sealed: [UInt8], associated: [UInt8]) -> [UInt8]? {
        guard sealed.count >= 1 + 4 + 12 + 16, sealed[0] == 1 else { return nil }
        let id = Array(sealed[1..<5])
        guard let key = lock.withLock({ ring.first { $0.id == id } }) else { return nil }
        let nonce = Array(sealed[5..<17])
        let body = Array(sealed[17..<(sealed.count - 16)])
        var tag = Array(sealed.suffix(16))
        guard let context = EVP_CIPHER_CTX_new() else { return nil }
        defer { EVP_CIPHER_CTX_free(context) }
        var out = [UInt8](repeating: 0, count: body.count + 16)
        var length: Int32 = 0, total: Int32 = 0
        guard EVP_DecryptInit_ex(context, EVP_aes_256_gcm(), nil, key.bytes, nonce) == 1,
              EVP_DecryptUpdate(context, nil, &length, associated, Int32(associated.count)) == 1,
              EVP_DecryptUpdate(context, &out, &length, body, Int32(body.count)) == 1,
              EVP_CIPHER_CTX_ctrl(context, EVP_CTRL_GCM_SET_TAG, 16, &tag) == 1 else { return nil }
        total = length
        guard out.withUnsafeMutableBufferPointer({ EVP_DecryptFinal_ex(context, $0.baseAddress! + Int(total), &length) }) == 1 else { return nil }
        total += length
        return Array(out.prefix(Int(total)))
    }
}
