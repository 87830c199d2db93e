import Foundation

/// The seed of the random moments (kills, outages) of this test run: `ALLOWANCE_TEST_SEED` replays a run,
/// otherwise a new one that the tests print.
public let testSeed: UInt64 =
    UInt64(ProcessInfo.processInfo.environment["ALLOWANCE_TEST_SEED"] ?? "") ?? UInt64.random(in: 1...999_999)
