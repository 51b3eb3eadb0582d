/// Whether the mount is locked, and the race between a lock and an unlock deriving its key:
/// a lock asked for meanwhile is kept, and wins when the derivation ends.
struct LockState {
    private(set) var locked = false
    private var unlocking = false
    private var lockRequested = false

    /// Whether the caller should lock now (false if already locked; an unlock under way then
    /// learns it must not finish).
    mutating func beginLock() -> Bool {
        // An unlock deriving its key must learn of every lock meanwhile, even one asked for
        // while the mount was unlocked (an unlock sent to an unlocked mount).
        if unlocking { lockRequested = true }
        guard !locked else { return false }
        locked = true
        return true
    }

    mutating func beginUnlock() {
        unlocking = true
        lockRequested = false
    }

    /// Ends an unlock; whether the mount is unlocked now. False after a failure, or when a
    /// lock came while the key was being derived: that lock wins, and the caller drops the keys.
    mutating func endUnlock(succeeded: Bool) -> Bool {
        unlocking = false
        guard succeeded && !lockRequested else {
            if succeeded { locked = true }
            return false
        }
        locked = false
        return true
    }

    /// The end of the mount: nothing is served again.
    mutating func lockForGood() {
        locked = true
    }
}
