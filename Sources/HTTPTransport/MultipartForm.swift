/// A `multipart/form-data` body (RFC 7578): text fields and files, as Telegram's `sendPhoto` and Discord's file
/// uploads take them. The boundary is given, so that a retry sends the same bytes.
public struct MultipartForm: Sendable {
    public let boundary: String
    public private(set) var body: [UInt8] = []

    /// `boundary`: letters and digits only are kept (it must not occur in the parts; a PNG or a text could hold
    /// anything, so it is long and the caller's id makes it unique).
    public init(boundary: String) {
        self.boundary = "----allowance-relay-" + boundary.filter { $0.isASCII && ($0.isLetter || $0.isNumber) }
    }

    public var contentType: String { "multipart/form-data; boundary=\(boundary)" }

    public mutating func field(_ name: String, _ value: String) {
        part(disposition: "form-data; name=\"\(Self.quoted(name))\"", type: nil, Array(value.utf8))
    }

    public mutating func file(_ name: String, filename: String, type: String, _ bytes: [UInt8]) {
        part(
            disposition: "form-data; name=\"\(Self.quoted(name))\"; filename=\"\(Self.quoted(filename))\"", type: type,
            bytes)
    }

    /// The body with its closing boundary.
    public var finished: [UInt8] { body + Array("--\(boundary)--\r\n".utf8) }

    private mutating func part(disposition: String, type: String?, _ bytes: [UInt8]) {
        var head = "--\(boundary)\r\nContent-Disposition: \(disposition)\r\n"
        if let type { head += "Content-Type: \(type)\r\n" }
        body += Array((head + "\r\n").utf8) + bytes + Array("\r\n".utf8)
    }

    /// A name in a header's quotes: no quote, backslash or line break can end it early.
    private static func quoted(_ s: String) -> String {
        String(s.filter { $0 != "\"" && $0 != "\\" && $0 != "\r" && $0 != "\n" })
    }
}
