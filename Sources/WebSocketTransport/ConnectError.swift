import Core

extension WebSocketError {
    /// Turns lws's connection-error text (and the upgrade's HTTP status, if it got that far) into a typed error a
    /// person can act on. `lacksSubjectAltName`: the loop's TLS check refused the certificate for naming its host in
    /// the Common Name only.
    static func connecting(
        to address: WebSocketAddress, _ text: String, status: Int, connectTimeout: Duration, lacksSubjectAltName: Bool
    ) -> WebSocketError {
        let target = "\(address.host):\(address.port)"
        let lower = text.lowercased()
        if status > 0 && status != 101 {
            let hint: String
            switch status {
            case 401, 403: hint = " The token was refused: check it (retrying with the same token will not help)."
            case 404: hint = " Nothing is there: check the URL and hub path (or the connection id expired)."
            case 409: hint = " Another socket already uses this connection id."
            default: hint = ""
            }
            return WebSocketError(
                .upgradeRejected(status: status),
                "The server at \(target) refused the WebSocket upgrade with HTTP \(status).\(hint)")
        }
        if lower.contains("dns") || lower.contains("getaddrinfo") || lower.contains("resolve")
            || lower.contains("unknown host")
        {
            return WebSocketError(
                .dnsFailure, "Could not resolve the host name '\(address.host)' (\(text)). Check the URL and DNS.")
        }
        if lower.contains("timed out") || lower.contains("timeout") {
            return WebSocketError(.timeout, "Connecting to \(target) timed out after \(connectTimeout) (\(text)).")
        }
        if lacksSubjectAltName { return WebSocketError(.tls, TLSAdvice.commonNameOnly(address.host)) }
        if lower.contains("tls") || lower.contains("ssl") || lower.contains("cert") || lower.contains("x509") {
            return WebSocketError(
                .tls, "TLS with \(target) failed: \(text). Check the server certificate or the CA file.")
        }
        if lower.contains("refused") || lower.contains("unable to connect") || lower.contains("connect failed") {
            return WebSocketError(
                .connectionRefused, "The connection to \(target) was refused (\(text)). Is the server running?")
        }
        return WebSocketError(
            .connectionLost, "Could not connect to \(target): \(text.isEmpty ? "unknown error" : text).")
    }
}
