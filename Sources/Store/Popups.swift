import Foundation
import GRDB
import StoreContract

extension Store {
    public func popup(sink: String, child: UUID, role: PopupRole) throws(StoreError) -> UInt32? {
        try read { db in
            try Int64.fetchOne(
                db, sql: "SELECT notification_id FROM popup WHERE sink = ? AND child_id = ? AND role = ?",
                arguments: [sink, child.lowercased, role.rawValue]
            ).flatMap { UInt32(exactly: $0) }
        }
    }

    /// Records the popup now showing for (sink, child, role); nil forgets it (closed).
    public func setPopup(sink: String, child: UUID, role: PopupRole, id: UInt32?) throws(StoreError) {
        try write { db in
            if let id {
                try db.execute(
                    sql: """
                        INSERT INTO popup (sink, child_id, role, notification_id) VALUES (?, ?, ?, ?)
                        ON CONFLICT(sink, child_id, role) DO UPDATE SET notification_id = excluded.notification_id
                        """,
                    arguments: [sink, child.lowercased, role.rawValue, Int64(id)])
            } else {
                try db.execute(
                    sql: "DELETE FROM popup WHERE sink = ? AND child_id = ? AND role = ?",
                    arguments: [sink, child.lowercased, role.rawValue])
            }
        }
    }
}
