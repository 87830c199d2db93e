import Core
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

    /// Asked of the server (`pg_prepared_statements`), not of the connection.
    func preparedOnTheServer(_ db: PostgresConnection) throws -> [String] {
        try db.query("SELECT statement FROM pg_prepared_statements ORDER BY prepare_time").rows.compactMap { $0[0] }
    }

    @Test func aStatementWithParametersIsPreparedOnceAndRunsPreparedAfter() async throws {
        let cluster = try await PostgresCluster()
        let db = try PostgresConnection(PostgresLocation(cluster.url()), password: cluster.password)
        try db.query("CREATE TABLE ids (id int PRIMARY KEY, name text)")
        for n in 1...5 { try db.query("INSERT INTO ids VALUES ($1, $2)", [String(n), "n\(n)"]) }
        #expect(try db.query("SELECT name FROM ids WHERE id = $1", ["4"]).scalar == "n4")
        #expect(try db.query("SELECT name FROM ids WHERE id = $1", ["2"]).scalar == "n2")
        #expect(
            try preparedOnTheServer(db) == ["INSERT INTO ids VALUES ($1, $2)", "SELECT name FROM ids WHERE id = $1"],
            "one each, however often it ran")
        // The server counts each run of a prepared statement as one plan (a custom or the generic one).
        let runs = try db.query(
            "SELECT statement, generic_plans + custom_plans FROM pg_prepared_statements ORDER BY prepare_time")
        #expect(runs.rows.map { $0[1] } == ["5", "2"], "every run after the first went through the prepared one")
    }

    @Test func aTableChangedUnderAPreparedStatementIsReadAgainNotRefused() async throws {
        let cluster = try await PostgresCluster()
        let db = try PostgresConnection(PostgresLocation(cluster.url()), password: cluster.password)
        try db.query("CREATE TABLE ids (id int PRIMARY KEY)")
        try db.query("INSERT INTO ids VALUES (1)")
        #expect(try db.query("SELECT * FROM ids WHERE id = $1", ["1"]).columns == ["id"])
        try db.query("ALTER TABLE ids ADD COLUMN name text DEFAULT 'one'")
        let again = try db.query("SELECT * FROM ids WHERE id = $1", ["1"])
        #expect(again.columns == ["id", "name"] && again.rows == [["1", "one"]])
    }

    @Test func statementsTheServerLostRunPlainlyFromThenOn() async throws {
        let cluster = try await PostgresCluster()
        let db = try PostgresConnection(PostgresLocation(cluster.url()), password: cluster.password)
        try db.query("CREATE TABLE ids (id int PRIMARY KEY)")
        try db.query("INSERT INTO ids VALUES ($1)", ["1"])
        try db.query("DEALLOCATE ALL")  // as a pooler's next server connection would have none of them
        try db.query("INSERT INTO ids VALUES ($1)", ["2"])
        try db.query("INSERT INTO ids VALUES ($1)", ["3"])
        #expect(try db.query("SELECT count(*) FROM ids").scalar == "3", "nothing lost, nothing twice")
        #expect(try preparedOnTheServer(db).isEmpty, "prepares no more")
    }

    @Test func aStatementTheServerCannotPrepareSaysWhyEvenInATransaction() async throws {
        let cluster = try await PostgresCluster()
        let db = try PostgresConnection(PostgresLocation(cluster.url()), password: cluster.password)
        #expect {
            try db.transaction { () throws(PostgresError) in try db.query("SELEKT $1::int", ["1"]) }
        } throws: { error in
            (error as? PostgresError)?.sqlState == "42601" && "\(error)".contains("syntax error")
        }
        #expect(db.isAlive)
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

        // Each wait blocks its thread: a thread of its own, not one of the pool's two that the test's notify needs.
        let waiting = Task {
            try await offThread(named: "pg-wait-10s") { try listener.notifications(timeout: .seconds(10)) }
        }
        #expect(await ProcessThreads.asleep("pg-wait-10s"), "the listener waits")
        try sender.notify("relay_jobs", payload: "sink=chat")
        try sender.notify("another_channel", payload: "not for us")
        let got = try await waiting.value
        #expect(got.map(\.channel) == ["relay_jobs"])
        #expect(got.first?.payload == "sink=chat")
        #expect(got.first?.senderPID == sender.backendPID())
    }

    @Test func aWaitWithoutATimeoutEndsWithANotifyOrAWake() async throws {
        let cluster = try await PostgresCluster()
        let location = try PostgresLocation(cluster.url())
        let listener = try PostgresConnection(location, password: cluster.password)
        let sender = try PostgresConnection(location, password: cluster.password)
        try listener.listen("relay_jobs")
        let wake = PollWake()
        let notified = Task {
            try await offThread(named: "pg-wait-notify") { try listener.notifications(timeout: nil, wake: wake) }
        }
        #expect(await ProcessThreads.asleep("pg-wait-notify"), "the listener waits")
        try sender.notify("relay_jobs", payload: "first")
        #expect(try await notified.value.map(\.payload) == ["first"])
        // Nothing comes: only the wake ends the wait, and nothing is lost by it.
        let woken = Task {
            try await offThread(named: "pg-wait-wake") { try listener.notifications(timeout: nil, wake: wake) }
        }
        #expect(await ProcessThreads.asleep("pg-wait-wake"), "the listener waits")
        wake.signal()
        #expect(try await woken.value.isEmpty)
        try sender.notify("relay_jobs", payload: "second")
        #expect(try listener.notifications(timeout: .seconds(10), wake: wake).map(\.payload) == ["second"])
    }

    /// The server gives up a vanished client as the client gives up the server: its keep-alives are set per session
    /// (two hours is the server's default), as the server itself reports them.
    @Test func theServersKeepAlivesAreTheSessions() async throws {
        let cluster = try await PostgresCluster()
        let location = try PostgresLocation(cluster.url())
        let show =
            "SELECT current_setting('tcp_keepalives_idle') || ' ' || current_setting('tcp_keepalives_interval') || ' ' || current_setting('tcp_keepalives_count')"
        let standard = try PostgresConnection(location, password: cluster.password)
        #expect(try standard.query(show).scalar == "5 2 3")
        let lease = try PostgresConnection(location, password: cluster.password, deadPeer: .lease)
        #expect(try lease.query(show).scalar == "1 1 2")
    }

    @Test func aStatementThatWaitsEndsWithItsAnswerOrIsCancelledAtTheWake() async throws {
        let cluster = try await PostgresCluster()
        let db = try PostgresConnection(try PostgresLocation(cluster.url()), password: cluster.password)
        let wake = PollWake()
        #expect(try db.query("SELECT $1::int + 1", ["41"], until: wake)?.scalar == "42")
        let sleeping = Task {
            try await offThread(named: "pg-wait") { try db.query("SELECT pg_sleep($1)", ["60"], until: wake) }
        }
        #expect(
            await eventually(.seconds(10)) {
                (try? await cluster.psql("SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep%'"))
                    == "1\n"
            }, "the statement runs in the server")
        wake.signal()
        #expect(try await sleeping.value == nil, "cancelled: no answer")
        #expect(
            try await cluster.psql(
                "SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep%' AND state = 'active'")
                == "0\n", "the server stopped running it")
        #expect(try db.query("SELECT 1").scalar == "1", "the session answers after the cancel")
        #expect(
            throws: PostgresError.self, "an error in the statement is thrown, not taken for a cancel",
            performing: { try db.query("SELECT 1/0", [], until: wake) })
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
