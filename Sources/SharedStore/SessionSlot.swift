import PostgresTransport
import Synchronization

/// One PostgreSQL session that one body at a time uses whole (a transaction's statements are not interleaved with
/// another thread's), made at first use and made again after it was lost (the server restarted, the network cut
/// it): the call that found it lost fails, the next one reconnects.
final class SessionSlot: Sendable {
    let location: PostgresLocation
    private let password: String?
    private let applicationName: String
    private let session = Mutex<PostgresConnection?>(nil)

    init(_ location: PostgresLocation, password: String?, applicationName: String) {
        self.location = location
        self.password = password
        self.applicationName = applicationName
    }

    /// Runs `body` with the session, alone.
    func with<T>(_ body: (PostgresConnection) throws(PostgresError) -> T) throws(PostgresError) -> T {
        try session.withLock { slot throws(PostgresError) -> T in
            let db: PostgresConnection
            if let open = slot {
                db = open
            } else {
                db = try PostgresConnection(location, password: password, applicationName: applicationName)
                slot = db
            }
            do throws(PostgresError) {
                return try body(db)
            } catch {
                if error.kind == .lost || error.kind == .connect {
                    db.close()
                    slot = nil
                }
                throw error
            }
        }
    }

    func close() {
        session.withLock { slot in
            slot?.close()
            slot = nil
        }
    }
}
