import CLibSSL
import Foundation

/// A TLS failure, with OpenSSL's reasons.
public struct TLSError: Error, CustomStringConvertible, Sendable {
    public var description: String

    init(_ what: String) {
        let reasons = TLSError.drainErrors()
        description = reasons.isEmpty ? what : "\(what): \(reasons)"
    }

    /// OpenSSL's error queue as text, emptied (it is per thread: each call site drains it).
    static func drainErrors() -> String {
        var reasons: [String] = []
        while case let code = ERR_get_error(), code != 0 {
            var buffer = [CChar](repeating: 0, count: 256)
            ERR_error_string_n(code, &buffer, buffer.count)
            reasons.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
        }
        return reasons.joined(separator: "; ")
    }
}

/// An OpenSSL context: the server's certificate and key, or a client's trusted CAs. A server's
/// is replaced whole on reload (SIGHUP); connections made before keep the one they began with.
public final class TLSContext: @unchecked Sendable {  // `handle` replaced and read only under `lock`
    private let lock = NSLock()
    private var handle: OpaquePointer
    public let isServer: Bool

    private init(handle: OpaquePointer, isServer: Bool) {
        self.handle = handle
        self.isServer = isServer
    }

    deinit { SSL_CTX_free(handle) }

    /// A server's context from PEM files: the certificate (with its chain) and its key.
    public static func server(certificateFile: String, keyFile: String) throws(TLSError) -> TLSContext {
        TLSContext(handle: try makeServer(certificateFile: certificateFile, keyFile: keyFile), isServer: true)
    }

    private static func makeServer(certificateFile: String, keyFile: String) throws(TLSError) -> OpaquePointer {
        guard let context = SSL_CTX_new(TLS_server_method()) else { throw TLSError("cannot make a TLS context") }
        _ = clibssl_ctx_set_min_tls12(context)
        _ = clibssl_ctx_set_partial_writes(context)
        guard SSL_CTX_use_certificate_chain_file(context, certificateFile) == 1 else {
            SSL_CTX_free(context)
            throw TLSError("cannot use the certificate \(certificateFile)")
        }
        guard SSL_CTX_use_PrivateKey_file(context, keyFile, SSL_FILETYPE_PEM) == 1, SSL_CTX_check_private_key(context) == 1 else {
            SSL_CTX_free(context)
            throw TLSError("cannot use the key \(keyFile) with the certificate \(certificateFile)")
        }
        return context
    }

    /// A client's context: trusts `caFile`'s certificates, else the system's; verifies the
    /// server's certificate unless `verify` is false.
    public static func client(caFile: String?, verify: Bool = true) throws(TLSError) -> TLSContext {
        guard let context = SSL_CTX_new(TLS_client_method()) else { throw TLSError("cannot make a TLS context") }
        _ = clibssl_ctx_set_min_tls12(context)
        _ = clibssl_ctx_set_partial_writes(context)
        if let caFile {
            guard SSL_CTX_load_verify_locations(context, caFile, nil) == 1 else {
                SSL_CTX_free(context)
                throw TLSError("cannot read the CA certificates in \(caFile)")
            }
        } else {
            SSL_CTX_set_default_verify_paths(context)
        }
        SSL_CTX_set_verify(context, verify ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nil)
        return TLSContext(handle: context, isServer: false)
    }

    /// Reads the certificate and key again (SIGHUP); on failure the current ones stay.
    public func reload(certificateFile: String, keyFile: String) throws(TLSError) {
        let fresh = try Self.makeServer(certificateFile: certificateFile, keyFile: keyFile)
        lock.lock()
        let old = handle
        handle = fresh
        lock.unlock()
        SSL_CTX_free(old)  // connections hold their own reference (SSL_new counts it)
    }

    /// A TLS stream over the connected socket `fd`. A client names the server it expects
    /// (checked against the certificate, and sent as SNI).
    public func stream(fd: Int32, serverName: String? = nil) throws(TLSError) -> TLSStream {
        lock.lock()
        let ssl = SSL_new(handle)
        lock.unlock()
        guard let ssl else { throw TLSError("cannot make a TLS session") }
        SSL_set_fd(ssl, fd)
        if isServer {
            SSL_set_accept_state(ssl)
        } else {
            if let serverName {
                if Self.isAddress(serverName) {
                    X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), serverName)
                } else {
                    SSL_set1_host(ssl, serverName)
                    _ = clibssl_set_host_name(ssl, serverName)
                }
            }
            SSL_set_connect_state(ssl)
        }
        return TLSStream(ssl)
    }

    static func isAddress(_ host: String) -> Bool {
        var v4 = in_addr(), v6 = in6_addr()
        return inet_pton(AF_INET, host, &v4) == 1 || inet_pton(AF_INET6, host, &v6) == 1
    }
}

/// One TLS session over a socket, blocking or not as the socket is. The handshake happens in
/// the first reads and writes; a non-blocking caller waits for what `wantsRead`/`wantsWrite`
/// say and calls again with the same bytes.
public final class TLSStream {
    private let ssl: OpaquePointer

    public enum Outcome: Equatable {
        case bytes(Int)
        /// Call again once the socket is readable (or writable).
        case wantRead, wantWrite
        /// The peer closed the TLS session or the socket.
        case closed
        case failed(String)
    }

    init(_ ssl: OpaquePointer) { self.ssl = ssl }

    deinit { SSL_free(ssl) }

    public func read(into buffer: UnsafeMutableRawBufferPointer) -> Outcome {
        ERR_clear_error()
        let count = SSL_read(ssl, buffer.baseAddress, Int32(min(buffer.count, Int(Int32.max))))
        return count > 0 ? .bytes(Int(count)) : outcome(count)
    }

    public func write(_ bytes: UnsafeRawBufferPointer) -> Outcome {
        guard !bytes.isEmpty else { return .bytes(0) }
        ERR_clear_error()
        let count = SSL_write(ssl, bytes.baseAddress, Int32(min(bytes.count, Int(Int32.max))))
        return count > 0 ? .bytes(Int(count)) : outcome(count)
    }

    /// The handshake has completed.
    public var isHandshakeDone: Bool { SSL_is_init_finished(ssl) == 1 }

    /// Decrypted bytes OpenSSL holds that the socket's readiness will not announce.
    public var hasBufferedInput: Bool { SSL_has_pending(ssl) == 1 }

    /// Completes the handshake on a blocking socket (a client's), or says why it failed.
    public func handshake() throws(TLSError) {
        ERR_clear_error()
        let result = SSL_do_handshake(ssl)
        guard result == 1 else {
            let reason = SSL_get_verify_result(ssl) == X509_V_OK ? "" : " (" + String(cString: X509_verify_cert_error_string(Int(SSL_get_verify_result(ssl)))) + ")"
            throw TLSError("TLS handshake failed\(reason)")
        }
    }

    /// Says goodbye (close_notify), best effort.
    public func shutdown() {
        ERR_clear_error()
        _ = SSL_shutdown(ssl)
    }

    /// The negotiated protocol version (`TLSv1.3`).
    public var version: String { String(cString: SSL_get_version(ssl)) }

    private func outcome(_ result: Int32) -> Outcome {
        switch SSL_get_error(ssl, result) {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_WANT_WRITE: return .wantWrite
        case SSL_ERROR_ZERO_RETURN: return .closed
        case SSL_ERROR_SYSCALL:
            let reasons = TLSError.drainErrors()
            return reasons.isEmpty ? .closed : .failed(reasons)
        default:
            return .failed(TLSError("TLS").description)
        }
    }
}
