import Testing
@testable import Records

/// The change feed's SQL is a resource (ChangeFeed.sql): the constants it shares with the
/// Swift side are literals there, and must be the same.
@Suite struct ChangeFeedSQLTests {
    let sql = ChangeFeed.installSQL

    @Test func theRegistrationsLifeIsTheSame() {
        #expect(sql.contains("interval '\(ChangeFeed.registrationSeconds) seconds'"))
        #expect(!sql.replacingOccurrences(of: "interval '\(ChangeFeed.registrationSeconds) seconds'", with: "").contains("seconds'"))
    }

    @Test func theAdvisoryLocksAndTheChannelAreTheSame() {
        let (quiet, skip) = (ChangeFeed.quietLock, ChangeFeed.skipLock)
        #expect(sql.contains("pg_try_advisory_lock(\(quiet.0), \(quiet.1))"))
        #expect(sql.contains("pg_advisory_unlock(\(quiet.0), \(quiet.1))"))
        #expect(sql.contains("pg_try_advisory_lock_shared(\(skip.0), \(skip.1))"))
        #expect(sql.contains("pg_notify('\(ChangeFeed.channel)', '')"))
    }

    @Test func itDefinesTheFunctionsTheTriggersCall() {
        for function in ["records.log_changes()", "records.row_key(", "records.wake_servers()"] {
            #expect(sql.contains("CREATE OR REPLACE FUNCTION \(function)"))
        }
    }
}
