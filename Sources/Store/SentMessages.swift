import AllowanceAPI
import Foundation
import GRDB
import StoreContract

extension Store {
    /// The message `sink` keeps for `subject` (e.g. `balance:<child id>`), if any.
    public func sentMessage(sink: String, subject: String) throws(StoreError) -> SentMessage? {
        try read { db in
            try Row.fetchOne(
                db, sql: "SELECT ref, posted_at FROM sent_message WHERE sink = ? AND subject = ?",
                arguments: [sink, subject]
            ).map {
                SentMessage(ref: $0["ref"], postedAt: ISODate.parse($0["posted_at"]) ?? .distantPast)
            }
        }
    }

    /// Records the message now standing for (sink, subject); nil forgets it (the destination no longer has it).
    public func setSentMessage(sink: String, subject: String, _ message: SentMessage?) throws(StoreError) {
        try write { db in
            if let message {
                try db.execute(
                    sql: """
                        INSERT INTO sent_message (sink, subject, ref, posted_at) VALUES (?, ?, ?, ?)
                        ON CONFLICT(sink, subject) DO UPDATE SET ref = excluded.ref, posted_at = excluded.posted_at
                        """,
                    arguments: [sink, subject, message.ref, ISO.string(message.postedAt)])
            } else {
                try db.execute(
                    sql: "DELETE FROM sent_message WHERE sink = ? AND subject = ?", arguments: [sink, subject])
            }
        }
    }
}
