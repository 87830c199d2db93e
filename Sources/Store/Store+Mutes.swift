import AllowanceAPI
import Foundation
import GRDB
import StoreContract

extension Store {
    /// Mutes `sink` for the child until `until` (a later mute of the same pair replaces it).
    public func mute(_ m: Mute) throws(StoreError) {
        try write { db in
            try db.execute(
                sql: """
                    INSERT INTO mute (sink, child_id, until) VALUES (?, ?, ?)
                    ON CONFLICT(sink, child_id) DO UPDATE SET until = excluded.until
                    """,
                arguments: [m.sink, m.childId.lowercased, ISO.string(m.until)])
        }
    }

    /// Lifts the mutes of `child` (on `sink` only, when given); returns how many there were.
    @discardableResult
    public func unmute(child: UUID, sink: String? = nil) throws(StoreError) -> Int {
        try write { db in
            if let sink {
                try db.execute(
                    sql: "DELETE FROM mute WHERE child_id = ? AND sink = ?", arguments: [child.lowercased, sink])
            } else {
                try db.execute(sql: "DELETE FROM mute WHERE child_id = ?", arguments: [child.lowercased])
            }
            return db.changesCount
        }
    }

    /// The mutes still running at `now`.
    public func mutes(at now: Date = Date()) throws(StoreError) -> [Mute] {
        // Read only (`mute list` and `status` leave the file as it was); `prune` (at each start) forgets the ones past.
        try read { db in
            try Row.fetchAll(
                db, sql: "SELECT sink, child_id, until FROM mute WHERE until > ?", arguments: [ISO.string(now)]
            ).compactMap { row -> Mute? in
                guard let child = UUID(uuidString: row["child_id"]), let until = ISODate.parse(row["until"]) else {
                    return nil
                }
                return Mute(sink: row["sink"], childId: child, until: until)
            }
        }
    }
}
