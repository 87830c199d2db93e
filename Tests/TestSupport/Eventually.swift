/// Polls `check` every 50 ms until it holds or `timeout` passes.
public func eventually(_ timeout: Duration = .seconds(30), _ check: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while ContinuousClock.now < deadline {
        if try await check() { return true }
        try? await Task.sleep(for: .milliseconds(50))
    }
    return false
}
