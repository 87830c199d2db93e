import PostgresTransport
import Testing

@Suite struct PostgresLocationTests {
    @Test func aFullURLIsReadWithItsParts() throws {
        let location = try PostgresLocation(
            "postgres://relay@db.home.lan:6543/allowance?sslmode=verify-full&sslrootcert=/etc/ssl/home-ca.pem")
        #expect(location.user == "relay")
        #expect(location.host == "db.home.lan")
        #expect(location.port == 6543)
        #expect(location.database == "allowance")
        #expect(location.sslMode == "verify-full")
        #expect(location.sslRootCert == "/etc/ssl/home-ca.pem")
        #expect(location.description == "postgres://relay@db.home.lan:6543/allowance?sslmode=verify-full")
    }

    @Test func thePortDefaultsTo5432AndPostgresqlIsTheSameScheme() throws {
        let location = try PostgresLocation("postgresql://relay@10.0.0.5/allowance")
        #expect(location.port == 5432)
        #expect(location.sslMode == nil)
    }

    @Test func aPasswordInTheURLIsRefusedWithoutBeingRepeated() {
        #expect {
            try PostgresLocation("postgres://relay:s3cret-pw@db/allowance")
        } throws: { error in
            let text = "\(error)"
            return text.contains("password_file") && text.contains("ALLOWANCE_RELAY_STORE_PASSWORD")
                && !text.contains("s3cret-pw")
        }
    }

    @Test(arguments: [
        ("mysql://relay@db/allowance", "the scheme is 'mysql'"),
        ("db.home.lan/allowance", "not a PostgreSQL URL"),
        ("postgres://db.home.lan/allowance", "no user"),
        ("postgres://relay@db.home.lan", "no database"),
        ("postgres://relay@db.home.lan:0/allowance", "out of range"),
        ("postgres://relay@db/allowance?sslmode=strict", "sslmode is 'strict'"),
        ("postgres://relay@db/allowance?password=x", "'password' is not a parameter"),
    ])
    func eachMistakeIsNamedWithAnExample(url: String, says: String) {
        #expect {
            try PostgresLocation(url)
        } throws: { error in
            let text = "\(error)"
            return text.contains(says) && text.contains("postgres://relay@db.home.lan:5432/allowance")
        }
    }
}
