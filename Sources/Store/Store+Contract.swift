import StoreContract

/// The SQLite file implements the whole storage contract: a single relay keeps everything here, and a replica keeps
/// here only what is per machine by nature (its popups).
extension Store: RelayStore, SyncStore, OperatorStore, PopupIds {
    public func storageBytes() -> Int64 { fileBytes }
}
