import AllowanceAPI
import Foundation
import SignalRProtocol
import Store
import TestSupport
import Testing

/// The e-mail sink against a real SMTP server (aiosmtpd, PyPI) that requires STARTTLS and a login, with a
/// certificate made by openssl for the test and checked by the relay.
@Suite(.serialized, .timeLimit(.minutes(2))) struct MailSinkTests {
    final class SMTPServer {
        let dir = FileManager.default.temporaryDirectory.appending(path: "smtp-\(UUID())")
        let cert: String
        let key: String
        let port: Int
        let peer: PythonPeer

        init(refuse: Bool = false) async throws {
            try FileManager.default.createDirectory(at: dir.appending(path: "mail"), withIntermediateDirectories: true)
            let certificate = try await SelfSignedCertificate()
            (cert, key) = (certificate.cert, certificate.key)
            peer = try await PythonPeer(
                script: "smtp_server.py",
                arguments: [dir.appending(path: "mail").path, cert, key, "relay@example.org", "mail-s3cret"]
                    + (refuse ? ["--refuse"] : []))
            port = Int(peer.address) ?? 0
        }

        deinit { peer.stop() }

        /// The mails received so far, oldest first.
        var mails: [JSONValue] {
            let files = ((try? FileManager.default.contentsOfDirectory(atPath: dir.appending(path: "mail").path)) ?? [])
                .filter { $0.hasSuffix(".json") }.sorted()
            return files.compactMap {
                try? JSONValue(parsing: Array(Data(contentsOf: dir.appending(path: "mail/\($0)"))))
            }
        }

        /// The relay against the simulator with a rule sending each transaction to this server, caught up.
        func withRelay(_ body: (URL, RelayProcess, String) async throws -> Void) async throws {
            let file = try config("rules:\n  - event: transaction.created\n    to: parents\n    digest: false\n")
            let storePath = dir.appending(path: "relay.sqlite").path
            try await withSim { base in
                let relay = try RelayProcess(
                    env: simRelayEnv(base, store: storePath), arguments: ["run", "--config", file])
                #expect(await relay.waitFor("caught up"))
                try await body(base, relay, storePath)
            }
        }

        /// A config with one e-mail sink to this server.
        func config(_ extra: String = "") throws -> String {
            let passwordFile = dir.appending(path: "smtp-password").path
            try "mail-s3cret\n".write(toFile: passwordFile, atomically: true, encoding: .utf8)
            chmod(passwordFile, 0o600)
            let yaml = """
                relay:
                  link: https://allowance.example.org/children/{child_id}
                sinks:
                  parents:
                    type: email
                    url: smtp://localhost:\(port)
                    ca_file: \(cert)
                    username: relay@example.org
                    password_file: \(passwordFile)
                    from: relay@example.org
                    to: [mum@example.org, dad@example.org]
                \(extra)
                """
            let file = dir.appending(path: "relay.yaml").path
            try yaml.write(toFile: file, atomically: true, encoding: .utf8)
            return file
        }
    }

    @Test func notifyTestSendsAPlainAndAnHTMLPartOverSTARTTLS() async throws {
        try #require(PythonPeer.available)
        let server = try await SMTPServer()
        let run = try RelayProcess(
            env: [:], arguments: ["notify", "test", "--config", try server.config(), "--sink", "parents"])
        #expect(await run.wait() == 0, "\(run.output)")
        #expect(!run.output.contains("mail-s3cret"))
        let mail = try #require(server.mails.first)
        #expect(mail["tls"] == true && mail["authenticated"] == true, "STARTTLS, then the login")
        #expect(
            mail["from"]?.stringValue == "relay@example.org" && mail["to"] == ["mum@example.org", "dad@example.org"])
        #expect(mail["subject"]?.stringValue == "allowance-relay test")
        #expect(mail["parts"]?["text/plain"]?.stringValue?.contains("the sink parents works") == true)
        #expect(mail["parts"]?["text/html"]?.stringValue?.contains("<b>allowance-relay test</b>") == true)
    }

    @Test func eachTransactionIsOneMailWithItsLinkAndTheDeliveryIdAsMessageId() async throws {
        try #require(PythonPeer.available)
        let server = try await SMTPServer()
        try await server.withRelay { base, relay, storePath in
            try await simTransaction(base, amount: "2.50", type: "Debit")
            #expect(await eventually(.seconds(20)) { server.mails.count >= 1 }, "\(relay.output.suffix(2000))")
            await relay.expectCleanStop()
            #expect(!relay.output.contains("mail-s3cret"))
            let mail = try #require(server.mails.first)
            let store = try Store.open(path: storePath)
            let delivery = try #require(try store.deliveries(sink: "parents").first)
            #expect(mail["messageId"]?.stringValue == "<\(delivery.id)@allowance-relay>", "a resend is the same mail")
            let text = mail["parts"]?["text/plain"]?.stringValue ?? ""
            #expect(
                text.contains("-$2.50 for \"Test\"")
                    && text.contains("https://allowance.example.org/children/11111111-1111-4111-8111-111111111111"),
                "\(text)")
            #expect(
                mail["parts"]?["text/html"]?.stringValue?.contains(
                    "href=\"https://allowance.example.org/children/11111111-") == true)
        }
    }

    @Test func aRecipientTheServerRefusesBecomesADeadLetterWithTheReason() async throws {
        try #require(PythonPeer.available)
        let server = try await SMTPServer(refuse: true)
        try await server.withRelay { base, relay, storePath in
            try await simTransaction(base, amount: "1.00", type: "Credit")
            let store = try Store.open(path: storePath)
            #expect(
                await eventually(.seconds(20)) { (try? store.deliveries(sink: "parents", state: .dead).count) == 1 },
                "\(relay.output.suffix(2000))")
            await relay.expectCleanStop()
            let dead = try #require(try store.deliveries(sink: "parents", state: .dead).first)
            #expect(dead.lastError?.contains("550") == true, "\(dead.lastError ?? "")")
            #expect(server.mails.isEmpty)
        }
    }
}
