import DBus

/// The prompts handed out and not yet finished. Each belongs to the client it was made for:
/// only that client may run or dismiss it, and it goes when that client leaves the bus.
struct SecretPrompts {
    static let perClient = 16
    static let total = 256

    enum State: Equatable {
        /// Made, not yet run (Prompt not called).
        case waiting
        /// Its command is running on a helper thread.
        case running
        /// Dismissed while its command ran: whatever the command gives is thrown away.
        case dismissed
    }

    struct Prompt {
        let owner: String
        /// The objects an unlock was asked for, returned when it completes.
        let objects: [String]
        var state: State
    }

    private var prompts: [UInt64: Prompt] = [:]
    private var nextID: UInt64 = 1

    mutating func make(owner: String, objects: [String]) throws(BusError) -> UInt64 {
        guard prompts.count < SecretPrompts.total, prompts.values.count(where: { $0.owner == owner }) < SecretPrompts.perClient else {
            throw .limitsExceeded("too many prompts waiting; complete or dismiss some first")
        }
        defer { nextID += 1 }
        prompts[nextID] = Prompt(owner: owner, objects: objects, state: .waiting)
        return nextID
    }

    subscript(id: UInt64) -> Prompt? {
        get { prompts[id] }
        set { prompts[id] = newValue }
    }

    /// Returns the prompts whose command is still running, to be told to throw its answer away.
    func ids(in state: State) -> [UInt64] {
        prompts.filter { $0.value.state == state }.map(\.key).sorted()
    }

    mutating func dismissAll(ownedBy owner: String) -> [UInt64] {
        var running: [UInt64] = []
        for (id, prompt) in prompts where prompt.owner == owner {
            if prompt.state == .running {
                prompts[id]?.state = .dismissed
                running.append(id)
            } else {
                prompts[id] = nil
            }
        }
        return running
    }
}
