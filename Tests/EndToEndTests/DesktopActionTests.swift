import AllowanceAPI
import Foundation
import SignalRProtocol
import Store
import StoreContract
import TestSupport
import Testing

/// Popups people can act on, on a real dunst under Xvfb: a click opens the child's page through the desktop's URL
/// handler, "Mute today" holds (across a restart too), a burst makes one popup per child, and every popup shows
/// the relay's icon.
@Suite(.serialized, .timeLimit(.minutes(2))) struct DesktopActionTests {
    static let icon = PythonPeer.root.appending(path: "deploy/icons/allowance-relay.png").path
    static let alice = "11111111-1111-4111-8111-111111111111"

    /// A config, and a directory with a stand-in `xdg-open` that writes what it was asked to open into `opened`.
    func setUp() throws -> (config: String, store: String, bin: String, opened: String) {
        let dir = FileManager.default.temporaryDirectory.appending(path: "relay-actions-\(UUID())")
        try FileManager.default.createDirectory(at: dir.appending(path: "bin"), withIntermediateDirectories: true)
        let opened = dir.appending(path: "opened").path
        let opener = dir.appending(path: "bin/xdg-open").path
        try "#!/bin/sh\necho \"$1\" >> \(opened)\n".write(toFile: opener, atomically: true, encoding: .utf8)
        chmod(opener, 0o755)
        let yaml = """
            relay:
              link: https://allowance.example.org/children/{child_id}
            sinks:
              popups:
                type: desktop
                icon: \(Self.icon)
            rules:
              - event: transaction.created
                to: popups
                digest: false
            """
        let file = dir.appending(path: "relay.yaml").path
        try yaml.write(toFile: file, atomically: true, encoding: .utf8)
        return (file, dir.appending(path: "relay.sqlite").path, dir.appending(path: "bin").path, opened)
    }

    func env(_ desktop: DesktopSession, _ base: URL, store: String, bin: String) -> [String: String] {
        desktop.env.merging(simRelayEnv(base, store: store)) { $1 }
            .merging(["PATH": bin + ":" + (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin")]) { $1 }
    }

    @Test func aClickOnAPopupOpensTheChildsPageAndThePopupShowsTheIcon() async throws {
        let desktop = try await DesktopSession()
        defer { desktop.stop() }
        let (file, storePath, bin, opened) = try setUp()
        try await withSim { base in
            let relay = try RelayProcess(
                env: env(desktop, base, store: storePath, bin: bin), arguments: ["run", "--config", file])
            #expect(await relay.waitFor("caught up"))
            try await simTransaction(base, amount: "3.00", type: "Credit")
            try await waitForDelivered(1, in: try Store.open(path: storePath))
            #expect(try await desktop.drawn() == 1)
            await desktop.screenshot("desktop-popup-with-icon")
            // dunst drew the icon: it warns in its log about one it cannot find (it did for dialog-information).
            #expect(!desktop.dunstLog.contains("No icon found"), "\(desktop.dunstLog)")
            _ = try await runCommand(["dunstctl", "action", "0"], env: desktop.env)
            #expect(
                await eventually(.seconds(10)) { FileManager.default.fileExists(atPath: opened) },
                "\(relay.output.suffix(1500))")
            let link = try String(contentsOfFile: opened, encoding: .utf8).trimmingCharacters(
                in: .whitespacesAndNewlines)
            #expect(link == "https://allowance.example.org/children/\(Self.alice)")
            // The relay says so once the handler has run: the file can be there before the line.
            #expect(
                await relay.waitFor("opened https://allowance.example.org (popup clicked)"),
                "\(relay.output.suffix(1500))")
            await relay.expectCleanStop()
        }
    }

    @Test func muteTodayHoldsForTheChildAcrossARestart() async throws {
        // dunst's context menu lists a popup's actions through a dmenu; this one picks "Mute today".
        let (file, storePath, bin, _) = try setUp()
        let picker = bin + "/pick-mute"
        let menu = bin + "/menu.txt"
        try "#!/bin/sh\ntee \(menu) | grep -m1 'Mute today'\n".write(toFile: picker, atomically: true, encoding: .utf8)
        chmod(picker, 0o755)
        let desktop = try await DesktopSession(dunstrc: "[global]\n    dmenu = \(picker)\n")
        defer { desktop.stop() }
        try await withSim { base in
            let environment = env(desktop, base, store: storePath, bin: bin)
            var relay = try RelayProcess(env: environment, arguments: ["run", "--config", file])
            #expect(await relay.waitFor("caught up"))
            try await simTransaction(base, amount: "1.00", type: "Credit")
            let store = try Store.open(path: storePath)
            try await waitForDelivered(1, in: store)
            #expect(try await desktop.drawn() == 1)
            _ = try await runCommand(["dunstctl", "context"], env: desktop.env)
            #expect(await relay.waitFor("muted until"), "\(relay.output.suffix(1500))")
            // The popup's menu offers "Open" once (it offered it twice: the default action and a button).
            let offered = try String(contentsOfFile: menu, encoding: .utf8)
            #expect(offered.components(separatedBy: "Open").count - 1 == 1, "\(offered)")
            let mute = try #require(try store.mutes().first)
            #expect(mute.sink == "popups" && mute.childId.uuidString.lowercased() == Self.alice)
            #expect(mute.until > Date() && mute.until <= Date().addingTimeInterval(86400), "until midnight")
            // Muted: a transaction of Alice's is stored, its popup is recorded as muted, not shown.
            try await simTransaction(base, amount: "2.00", type: "Credit")
            #expect(
                await eventually(.seconds(10)) {
                    (try? store.transactions(child: UUID(uuidString: Self.alice)!).count) ?? 0 >= 2
                })
            #expect(await ledgerSettled(store), "every planned popup shown or held back")
            let shown = { try store.deliveries(sink: "popups").filter { $0.state != .muted } }
            #expect(try shown().count == 1)
            #expect(
                try store.deliveries(sink: "popups", state: .muted).count == 1, "what the mute held back is recorded")
            await relay.expectCleanStop()
            // Still muted after a restart; another child is not.
            relay = try RelayProcess(env: environment, arguments: ["run", "--config", file])
            #expect(await relay.waitFor("caught up"))
            try await simTransaction(base, amount: "2.50", type: "Debit")
            try await simTransaction(
                base, child: "22222222-2222-4222-8222-222222222222", amount: "1.25", type: "Credit")
            #expect(await eventually(.seconds(10)) { (try? shown().count) == 2 })
            #expect(await ledgerSettled(store), "every planned popup shown or held back")
            let planned = try shown()
            #expect(
                planned.count == 2 && planned.filter { $0.childId?.uuidString.lowercased() == Self.alice }.count == 1)
            #expect(try store.deliveries(sink: "popups", state: .muted).count == 2)
            await relay.expectCleanStop()
        }
    }

    @Test func aBurstOfTransactionsIsOnePopupPerChildUpdatedInPlace() async throws {
        let desktop = try await DesktopSession()
        defer { desktop.stop() }
        let (file, storePath, bin, _) = try setUp()
        try await withSim { base in
            let relay = try RelayProcess(
                env: env(desktop, base, store: storePath, bin: bin), arguments: ["run", "--config", file])
            #expect(await relay.waitFor("caught up"))
            for amount in ["1.00", "2.00", "3.00", "4.00", "5.00", "6.00"] {
                try await simTransaction(base, amount: amount, type: "Credit")
            }
            try await waitForDelivered(6, in: try Store.open(path: storePath))
            #expect(try await desktop.drawn() == 1, "six transactions of one child, one popup on the screen")
            await desktop.screenshot("desktop-burst-grouped")
            await relay.expectCleanStop()
            let shown = try await desktop.popups()
            #expect(shown.count == 1, "\(shown)")
            #expect(shown.first?.summary == "Alice: 6 transactions", "\(shown)")
            #expect(
                shown.first?.body.contains("+$6.00") == true && shown.first?.body.contains("(and 2 before)") == true,
                "\(shown)")
        }
    }
}
