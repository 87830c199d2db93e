import Foundation
import StoreContract

/// The SQLite file implements the whole storage contract: a single relay keeps everything here, and a replica keeps
/// here only what is per machine by nature (its popups).
extension Store: RelayStore, SyncStore, OperatorStore, PopupIds {
    public func storageBytes() -> Int64 { fileBytes }

    /// One relay runs on a file (`FileLease`): its worker holds the sink's pause in memory, and no other relay reads
    /// this ledger.
    public func pauseSink(_ sink: String, until: Date) {}

    /// One relay runs on a file: its worker keeps a child's alerts in order by itself (`DispatchMachine`).
    public func setOrderedSinks(_ sinks: Set<String>) {}
}
