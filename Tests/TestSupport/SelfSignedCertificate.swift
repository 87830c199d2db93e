import Foundation

/// A self-signed certificate and its key, made by openssl for a test, in a folder of their own.
public struct SelfSignedCertificate: Sendable {
    public let cert: String
    public let key: String

    /// For `host`: with the name in subjectAltName (what TLS clients check), or, as many home-lab guides still make
    /// them, in the Common Name only.
    public init(host: String = "localhost", subjectAltName: Bool = true) async throws {
        let dir = FileManager.default.temporaryDirectory.appending(path: "tls-\(UUID())")
        try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
        (cert, key) = (dir.appending(path: "cert.pem").path, dir.appending(path: "key.pem").path)
        var args = [
            "openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
            "-subj", "/CN=\(host)",
        ]
        if subjectAltName { args += ["-addext", "subjectAltName=DNS:\(host)"] }
        _ = try await runCommand(args)
    }
}
