/// Whether the mount is locked, and the race between a lock and an unlock deriving its key:
/// a lock asked for meanwhile is kept, and wins when the derivation ends.
struct LockState {
    private(set) var locked = false
    private var unlocking = false
    private var lockRequested = false

    /// Whether the caller should lock now (false if already locked; an unlock under way then
    /// learns it must not finish).
    mutating func beginLock() -> Bool {
        guard !locked else {
            if unlocking { lockRequested = true }
            return false
        }
        locked = true
        return true
    }

    mutating func beginUnlock() {
        unlocking = true
        lockRequested = false
    }

    /// Whether a lock came while the key was being derived.
    var lockWasRequested: Bool { lockRequested }

    mutating func endUnlock(succeeded: Bool) {
        unlocking = false
        if succeeded && !lockRequested { locked = false }
    }

    /// The end of the mount: nothing is served again.
    mutating func lockForGood() {
        locked = true
    }
}
