import Foundation
import Glibc
import Testing

/// What a change through a mount of a vault in PostgreSQL costs in round trips to the server,
/// counted on the wire (`PostgresRoundTripCounter`), for each system call as a program makes it:
/// the FUSE requests' lookups, the write transactions and what the next operation reads again.
@Suite(.serialized, .tags(.mount, .postgres, .slow)) struct PostgresRoundTripTests {
    /// One statement per round trip cost 31 per `echo >`, 22.6 per rename and 18.7 per delete;
    /// statements whose results nothing waits for now go with the next one that is waited for,
    /// and a change from rows the connection knows goes in one flight, BEGIN to COMMIT.
    @Test func aChangeCostsAFewRoundTripsNotOnePerStatement() throws {
        let server = try PostgresServer()
        let counter = try PostgresRoundTripCounter(to: server)
        let uri = try server.createDatabase("trips")
            .replacingOccurrences(of: "host=\(server.socketDirectory)", with: "host=\(counter.socketDirectory)")
        // The request path alone: an offline replica's copies are counted apart (OfflineReplicaTests).
        let mount = try MountFixture(vault: uri, extra: ["--no-offline"])
        defer { withExtendedLifetime(counter) { mount.unmountQuietly() } }
        #expect(mkdir(mount.path("dir"), 0o700) == 0)
        let count = 10
        func perCall(_ what: String, _ call: (Int) -> Bool) -> Double {
            let before = counter.roundTrips
            for index in 0..<count { #expect(call(index), "\(what) \(index)") }
            let each = Double(counter.roundTrips - before) / Double(count)
            print("round trips per \(what): \(String(format: "%.1f", each))")
            return each
        }
        let created = perCall("echo > item") { writeFile(mount.path("dir/item\($0)"), Array("value \($0)\n".utf8)) == 0 }
        let read = perCall("cat item") { readFile(mount.path("dir/item\($0)")) == Array("value \($0)\n".utf8) }
        let renamed = perCall("rename") { rename(mount.path("dir/item\($0)"), mount.path("dir/moved\($0)")) == 0 }
        let deleted = perCall("delete") { unlink(mount.path("dir/moved\($0)")) == 0 }
        for index in 0..<count { #expect(mkdir(mount.path("dir/sub\(index)"), 0o700) == 0) }
        let removed = perCall("rmdir") { rmdir(mount.path("dir/sub\($0)")) == 0 }
        // Before a vault stopped reading its own commits back and a read took one statement:
        // 13.5, 5.5, 9.7 and 7.8; then 9.0, 3.3, 7.9 and 5.1. With the rows a connection
        // knows kept between transactions and a change in one flight: 2.0-2.1, 0.6, 1.0 and
        // 1.2-1.7 (a sync of the renames' carried commits lands among the deletes or not).
        // `cat` of what this mount wrote asks nothing of the server.
        #expect(created > 0 && created <= 3)
        #expect(read <= 1.2)
        #expect(renamed > 0 && renamed <= 1.6)
        #expect(deleted > 0 && deleted <= 2.5)
        // An empty folder made here is known to be empty, and to have no rules: 1.
        #expect(removed > 0 && removed <= 1.6)
    }
}
