/// What to tell a user whose server's certificate the relay refuses, the same from every transport.
public enum TLSAdvice {
    /// A certificate that names its host in the Common Name only: modern TLS clients (libwebsockets, browsers, and
    /// this relay on every transport) look for the name in subjectAltName alone.
    public static func commonNameOnly(_ host: String) -> String {
        "\(host): the server's certificate names its host in the Common Name (CN) only, without a subjectAltName; "
            + "the relay, like browsers and every modern TLS client, checks the name in subjectAltName alone, on every "
            + "transport. Make a certificate that carries it, e.g. openssl req -x509 -newkey rsa:2048 -nodes -days 825 "
            + "-keyout key.pem -out cert.pem -subj \"/CN=\(host)\" -addext \"subjectAltName=DNS:\(host)\" (IP:\(host) for an "
            + "address), and give its CA (or the certificate itself) as server.ca_file"
    }
}
