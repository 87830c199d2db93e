import CCurl
import Foundation

/// One e-mail for an SMTP server: the envelope and the whole message (RFC 5322, CRLF line ends). libcurl's SMTP
/// client speaks it, on the same engine and thread as every HTTP request.
public struct MailRequest: Sendable {
    /// `smtp://host:587` (STARTTLS) or `smtps://host:465` (TLS from the start).
    public var url: URL
    public var from: String
    public var to: [String]
    public var message: [UInt8]
    public var username: String?
    public var password: String?
    /// STARTTLS is required on `smtp://` (the server must offer it); false allows a plain local relay.
    public var requireTLS = true
    public var trust: HTTPRequest.Trust = .system
    public var timeout: Duration = .seconds(30)

    public init(url: URL, from: String, to: [String], message: [UInt8]) {
        self.url = url
        self.from = from
        self.to = to
        self.message = message
    }
}

extension HTTPClient {
    /// Sends `mail`; returns the server's last reply code (250 when accepted). A refusal by the server throws with
    /// its reply code in `smtpCode` (5xx: it will not take this mail; 4xx: later, perhaps).
    public func send(_ mail: MailRequest) async throws(HTTPError) -> Int {
        var carrier = HTTPRequest(.post, mail.url, body: [], timeout: mail.timeout, maxResponseBytes: 64 * 1024)
        carrier.trust = mail.trust
        carrier.freshConnection = true  // a mail now and then: no session kept open on the server
        let transfer = Transfer(carrier)
        transfer.mail = MailTransfer(mail)
        return try await perform(transfer).get().status
    }
}

/// The SMTP side of a transfer: the recipients' list and the message read out to libcurl.
final class MailTransfer: @unchecked Sendable {
    let request: MailRequest
    var recipients: UnsafeMutablePointer<curl_slist>?
    var sent = 0

    init(_ request: MailRequest) {
        self.request = request
        for r in request.to { recipients = curl_slist_append(recipients, "<\(r)>") }
    }

    deinit { curl_slist_free_all(recipients) }

    /// Sets the SMTP options on `handle` (the engine has set the URL, timeouts, trust and error buffer).
    func configure(_ handle: UnsafeMutableRawPointer, context: UnsafeMutableRawPointer) {
        ccurl_set_string(handle, CURLOPT_PROTOCOLS_STR, "smtp,smtps")
        ccurl_set_string(handle, CURLOPT_MAIL_FROM, "<\(request.from)>")
        ccurl_set_pointer(handle, CURLOPT_MAIL_RCPT, recipients)
        if let u = request.username { ccurl_set_string(handle, CURLOPT_USERNAME, u) }
        if let p = request.password { ccurl_set_string(handle, CURLOPT_PASSWORD, p) }
        // Mandatory: a server that does not offer STARTTLS fails the send rather than see the password in clear.
        if request.requireTLS { ccurl_set_long(handle, CURLOPT_USE_SSL, Int(CURLUSESSL_ALL.rawValue)) }
        ccurl_set_long(handle, CURLOPT_UPLOAD, 1)
        ccurl_set_offset(handle, CURLOPT_INFILESIZE_LARGE, curl_off_t(request.message.count))
        ccurl_set_callback(handle, CURLOPT_READFUNCTION, onMailRead)
        ccurl_set_pointer(handle, CURLOPT_READDATA, context)
    }
}

/// The message, as much as libcurl asks for at a time.
private func onMailRead(
    _ buffer: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ context: UnsafeMutableRawPointer?
) -> Int {
    let t = Unmanaged<Transfer>.fromOpaque(context!).takeUnretainedValue()
    guard let mail = t.mail, let buffer else { return 0 }
    let n = min(size * count, mail.request.message.count - mail.sent)
    mail.request.message.withUnsafeBytes { bytes in
        UnsafeMutableRawPointer(buffer).copyMemory(from: bytes.baseAddress! + mail.sent, byteCount: n)
    }
    mail.sent += n
    return n
}
