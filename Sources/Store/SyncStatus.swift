import AllowanceAPI
import Core
import Foundation
import GRDB
import StoreContract

extension Store {
    public func setSyncStatus(_ status: SyncStatus) throws(StoreError) {
        try setState("status", status.json)
    }

    public func syncStatus() throws(StoreError) -> SyncStatus? {
        try state("status").flatMap(SyncStatus.init(json:))
    }

    /// A JSON value under `key` in sync_state: what the daemon records for `status` (another process) to read.
    func setState(_ key: String, _ value: JSONValue) throws(StoreError) {
        try write { db in
            try db.execute(
                sql:
                    "INSERT INTO sync_state (key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value = excluded.value",
                arguments: [key, value.serialized])
        }
    }

    func state(_ key: String) throws(StoreError) -> JSONValue? {
        try read { db in
            try String.fetchOne(db, sql: "SELECT value FROM sync_state WHERE key = ?", arguments: [key])
                .flatMap { try? JSONValue(parsing: Array($0.utf8)) }
        }
    }
}

extension Store {
    public func setLinkStatus(_ status: LinkStatus) throws(StoreError) {
        try setState("link", status.json)
    }

    public func linkStatus() throws(StoreError) -> LinkStatus? {
        try state("link").flatMap(LinkStatus.init(json:))
    }
}
