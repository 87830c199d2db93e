/// Polls `check` every 50 ms until it holds or `timeout` passes.
public func eventually(_ timeout: Duration = .seconds(30), _ check: () async throws -> Bool) async rethrows -> Bool {
    let deadline = ContinuousClock.now + timeout
    while true {
        if try await check() { return true }
        // Checked once more after the deadline: a sleep that a busy pool held past it must not end the wait unseen.
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: .milliseconds(50))
    }
}
