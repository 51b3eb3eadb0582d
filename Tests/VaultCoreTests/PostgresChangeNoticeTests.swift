import Testing
@testable import StoragePostgres
@testable import VaultCore

/// The NOTIFY payload a write sends: its origin and the node ids it touched, or no ids for
/// "anything may have changed".
@Suite struct PostgresChangeNoticeTests {
    @Test func namesTheTouchedNodesOnceEach() {
        var notice = PostgresChangeNotice()
        notice.note(12, 1)
        notice.note(12)
        #expect(notice.payload(origin: "ab12") == "ab12:1,12")
        #expect(PostgresChangeNotice.change(in: "ab12:1,12", ownOrigin: "cd34") == .nodes([NodeID(1), NodeID(12)]))
    }

    @Test func aListenerSkipsItsOwnProcesssWrites() {
        #expect(PostgresChangeNotice.change(in: "ab12:1,12", ownOrigin: "ab12") == nil)
        #expect(PostgresChangeNotice.change(in: "ab12:", ownOrigin: "ab12") == nil)
    }

    @Test func tooManyIdsMeanEverything() {
        var notice = PostgresChangeNotice()
        for id in Int64(1_000_000_000_000)..<Int64(1_000_000_000_400) { notice.note(id) }
        let payload = notice.payload(origin: "ab12")
        #expect(payload == "ab12:")
        #expect(PostgresChangeNotice.change(in: payload, ownOrigin: "cd34") == .everything)
        notice.reset()
        notice.note(7)
        #expect(notice.payload(origin: "ab12") == "ab12:7")
    }

    @Test func aWriteOfEverythingStaysEverything() {
        var notice = PostgresChangeNotice()
        notice.noteEverything()
        notice.note(3)
        #expect(notice.payload(origin: "ab12") == "ab12:")
    }

    /// An empty payload (a writer that names nothing) or one that does not parse tells nothing
    /// precise: everything may have changed.
    @Test func anythingElseMeansEverything() {
        for payload in ["", "ab12:1,x", "ab12:1,,2", "no colon", "ab12:-5", "ab12:0", "ab12:1,-9223372036854775808",
                        "ab12:9223372036854775808", "ab12: 3"] {
            #expect(PostgresChangeNotice.change(in: payload, ownOrigin: "cd34") == .everything, "\(payload)")
        }
    }

    @Test func changesMerge() {
        #expect(VaultChange.nodes([NodeID(1)]).merged(with: .nodes([NodeID(2)])) == .nodes([NodeID(1), NodeID(2)]))
        #expect(VaultChange.nodes([NodeID(1)]).merged(with: .everything) == .everything)
    }
}
