import Core
import Foundation

/// Runs a command to its end; its output goes through a file. (Not Foundation's Process: a script that leaves
/// daemons behind made its waitUntilExit hang here, with the script already a zombie.) It waits off the pool: the
/// suites share one process, and two blocking waits on a two-core machine stalled every other suite's tasks and timers
/// (in CI, a simulator's token expiry overtook a client's refresh timer).
public func runCommand(_ args: [String], env: [String: String] = [:]) async throws -> String {
    try await offThread(named: "test-harness") { try runCommandBlocking(args, env: env) }
}

/// `runCommand` on the calling thread: for harness code already off the pool, and for a quick clean-up in a `defer`,
/// which cannot wait.
public func runCommandBlocking(_ args: [String], env: [String: String] = [:]) throws -> String {
    let outPath = FileManager.default.temporaryDirectory.appending(path: "shell-\(UUID()).out").path
    defer { unlink(outPath) }
    var actions = posix_spawn_file_actions_t()
    posix_spawn_file_actions_init(&actions)
    defer { posix_spawn_file_actions_destroy(&actions) }
    posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
    posix_spawn_file_actions_addopen(&actions, 1, outPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
    posix_spawn_file_actions_adddup2(&actions, 1, 2)
    let environment = ProcessInfo.processInfo.environment.merging(env) { $1 }.map { "\($0.key)=\($0.value)" }
    let argv = (["/usr/bin/env"] + args).map { strdup($0) } + [nil]
    let envp = environment.map { strdup($0) } + [nil]
    defer { (argv + envp).forEach { free($0) } }
    var pid = pid_t()
    guard posix_spawn(&pid, "/usr/bin/env", &actions, nil, argv, envp) == 0 else {
        throw HarnessError("cannot run \(args[0])")
    }
    var status: Int32 = 0
    while waitpid(pid, &status, 0) == -1 && errno == EINTR {}
    let output = (try? String(contentsOfFile: outPath, encoding: .utf8)) ?? ""
    // A command that failed is an error that says so (its exit status and output), not an empty answer.
    let exited = status & 0x7f == 0
    guard exited && (status >> 8) & 0xff == 0 else {
        let how = exited ? "exited with \((status >> 8) & 0xff)" : "was killed by signal \(status & 0x7f)"
        throw HarnessError("`\(args.joined(separator: " "))` \(how): \(output.suffix(600))")
    }
    return output
}
