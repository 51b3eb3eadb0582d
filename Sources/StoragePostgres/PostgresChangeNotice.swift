import VaultStorageKit
/// What a write transaction tells the other sessions of a vault, as its NOTIFY payload:
/// `ORIGIN:ID,ID,...`, the writing storage's random origin (so a listener can skip its own
/// process's writes, whichever backend carried them) and the ids of the nodes it touched,
/// with the parents whose entries it changed. Node ids are stored in clear by the server
/// already; nothing else goes in. No ids means anything may have changed: a write too large
/// to name (past `capacity`, well under PostgreSQL's 8000-byte limit), one that touches every
/// record (a format upgrade), or a writer that names nothing (an empty payload).
struct PostgresChangeNotice {
    static let capacity = 4000

    private var ids: Set<Int64> = []
    private var everything = false
    private var length = 0

    mutating func note(_ touched: Int64...) {
        guard !everything else { return }
        for id in touched where ids.insert(id).inserted {
            length += String(id).utf8.count + 1
        }
        if length > PostgresChangeNotice.capacity { noteEverything() }
    }

    mutating func noteEverything() {
        everything = true
        ids = []
    }

    mutating func reset() { self = PostgresChangeNotice() }

    func payload(origin: String) -> String {
        origin + ":" + (everything ? "" : ids.sorted().map(String.init).joined(separator: ","))
    }

    /// What a payload says to a listener whose own writes carry `ownOrigin`: nil for its own.
    static func change(in payload: String, ownOrigin: String) -> VaultChange? {
        guard let colon = payload.firstIndex(of: ":") else { return .everything }
        guard payload[..<colon] != ownOrigin else { return nil }
        let list = payload[payload.index(after: colon)...]
        guard !list.isEmpty else { return .everything }
        var nodes: Set<NodeID> = []
        for part in list.split(separator: ",", omittingEmptySubsequences: false) {
            // Anyone who may connect may NOTIFY: an id no node can have (ids start at 1) is
            // as meaningless as garbage, and must never reach the inode arithmetic.
            guard let id = Int64(part), id > 0 else { return .everything }
            nodes.insert(NodeID(id))
        }
        return .nodes(nodes)
    }
}
