import AllowanceAPI
import ArgumentParser
import Config
import Core
import Foundation
import Relay
import RelayDaemon
import Store
import StoreContract

/// Tells the relay running on `store`, if one is, that another process changed the database (SIGUSR1: it reads the
/// mutes again and drains the outbox now). Its pid, or nil when none runs. Only a process that catches SIGUSR1 is
/// signalled: the pid may have been reused by another program since, or the daemon may run inside a program that
/// traps no signals for it (`Daemon.run(signals: nil)`), and SIGUSR1's default is to end the process. Such a relay
/// sees the change at its next outbox poll (5 minutes at most).
func signalTheRunningRelay(_ store: Store) -> Int32? {
    guard let link = try? store.linkStatus(), link.state != .stopped, link.pid > 0,
        SignalDisposition.caught(SIGUSR1, by: link.pid),
        kill(link.pid, SIGUSR1) == 0
    else { return nil }
    return link.pid
}

/// Tells the relay running on `opened` of a change this command made, and says so in the caller's words: on a file
/// by SIGUSR1 (`signalled` gets its pid, `none` when no relay catches it); on the shared database the change's own
/// notification reached every replica (`shared`).
func tellTheRunningRelay(_ opened: OpenedStore, shared: String, signalled: (Int32) -> String, none: String) -> String {
    guard let file = opened.file else { return shared }
    return signalTheRunningRelay(file).map(signalled) ?? none
}
