import Foundation
import PostgresTransport
import TestSupport
import Testing

/// Against a real PostgreSQL server the test starts (Debian's `postgresql`), with password authentication.
@Suite(.timeLimit(.minutes(1))) struct PostgresConnectionTests {
    @Test func parametersTravelApartFromTheStatementAndComeBackExact() async throws {
        let cluster = try await PostgresCluster()
        let db = try PostgresConnection(PostgresLocation(cluster.url()), password: cluster.password)
        try db.query("CREATE TABLE notes (id bigserial PRIMARY KEY, body text, amount numeric(12,2))")
        let tricky = "Robert'); DROP TABLE notes;-- ünïcødé ✓"
        let inserted = try db.query(
            "INSERT INTO notes (body, amount) VALUES ($1, $2), ($3, $4)", [tricky, "12345678.91", nil, "0.10"])
        #expect(inserted.affected == 2)
        let rows = try db.query("SELECT body, amount FROM notes ORDER BY id")
        #expect(rows.rows == [[tricky, "12345678.91"], [nil, "0.10"]])
        #expect(rows[0, "amount"] == "12345678.91")
        #expect(try db.query("SELECT count(*) FROM notes").scalar == "2", "the table is still there")
    }

    @Test func aRefusedStatementSaysWhyWithItsSQLState() async throws {
        let cluster = try await PostgresCluster()
        let db = try PostgresConnection(PostgresLocation(cluster.url()), password: cluster.password)
        try db.query("CREATE TABLE ids (id int PRIMARY KEY)")
        try db.query("INSERT INTO ids VALUES (1)")
        #expect {
            try db.query("INSERT INTO ids VALUES ($1)", ["1"])
        } throws: { error in
            let e = error as? PostgresError
            return e?.kind == .statement && e?.sqlState == "23505" && e?.message.contains("duplicate key") == true
        }
        #expect(db.isAlive, "a refused statement leaves the session usable")
    }

    @Test func aTransactionThatThrowsLeavesNothingBehind() async throws {
        let cluster = try await PostgresCluster()
        let db = try PostgresConnection(PostgresLocation(cluster.url()), password: cluster.password)
        try db.query("CREATE TABLE ids (id int PRIMARY KEY)")
        #expect(throws: PostgresError.self) {
            try db.transaction { () throws(PostgresError) in
                try db.query("INSERT INTO ids VALUES (1)")
                try db.query("INSERT INTO ids VALUES (1)")
            }
        }
        #expect(try db.query("SELECT count(*) FROM ids").scalar == "0")
    }

    @Test func aWrongPasswordIsNamedAndTheSecretIsNot() async throws {
        let cluster = try await PostgresCluster()
        let wrong = "not-the-password-\(UUID())"
        #expect {
            try PostgresConnection(PostgresLocation(cluster.url()), password: wrong)
        } throws: { error in
            let text = "\(error)"
            return (error as? PostgresError)?.kind == .connect && text.contains("password authentication failed")
                && text.contains("127.0.0.1") && !text.contains(wrong)
        }
    }

    @Test func sslRequiredOfAServerWithoutTLSIsRefused() async throws {
        let cluster = try await PostgresCluster()
        #expect {
            try PostgresConnection(PostgresLocation(cluster.url(query: "sslmode=require")), password: cluster.password)
        } throws: { error in
            (error as? PostgresError)?.kind == .connect && "\(error)".contains("SSL")
        }
    }

    @Test func aNotifyReachesTheListeningSessionAndSilenceTimesOut() async throws {
        let cluster = try await PostgresCluster()
        let location = try PostgresLocation(cluster.url())
        let listener = try PostgresConnection(location, password: cluster.password)
        let sender = try PostgresConnection(location, password: cluster.password)
        try listener.listen("relay_jobs")
        let start = ContinuousClock.now
        #expect(try listener.notifications(timeout: .milliseconds(300)).isEmpty)
        #expect(ContinuousClock.now - start >= .milliseconds(250), "it waited for the timeout")

        let waiting = Task.detached { try listener.notifications(timeout: .seconds(10)) }
        try await Task.sleep(for: .milliseconds(100))
        try sender.notify("relay_jobs", payload: "sink=chat")
        try sender.notify("another_channel", payload: "not for us")
        let got = try await waiting.value
        #expect(got.map(\.channel) == ["relay_jobs"])
        #expect(got.first?.payload == "sink=chat")
        #expect(got.first?.senderPID == sender.backendPID())
    }

    @Test func aServerThatStopsIsALostConnectionAndANewOneWorksOnceItIsBack() async throws {
        let cluster = try await PostgresCluster()
        let location = try PostgresLocation(cluster.url())
        let db = try PostgresConnection(location, password: cluster.password)
        cluster.stop()
        #expect {
            try db.query("SELECT 1")
        } throws: { error in
            (error as? PostgresError)?.kind == .lost
        }
        #expect(throws: PostgresError.self) { try PostgresConnection(location, password: cluster.password) }
        try await cluster.start()
        let again = try PostgresConnection(location, password: cluster.password)
        #expect(try again.query("SELECT 40 + 2").scalar == "42")
    }
}
