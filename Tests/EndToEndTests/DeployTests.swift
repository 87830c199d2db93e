import Foundation
import TestSupport
import Testing

/// deploy/: the install script into a temporary root and both systemd units through `systemd-analyze verify`
/// (Tests/Deploy/check-deploy.sh does the work; this runs it in the suite).
@Suite struct DeployTests {
    @Test func installScriptAndUnitsPassTheirChecks() async throws {
        let script = PythonPeer.root.appending(path: "Tests/Deploy/check-deploy.sh").path
        let result = try await runCommand([script, relayBinaryPath])
        #expect(result.hasSuffix("deploy ok\n"), "\(result)")
    }
}
