import CSodium
import Locking
import Synchronization

/// Where SecureBuffer's bytes come from: `sodium_malloc` memory, locked and checked, wiped
/// before it is given back.
///
/// Allocations of up to a page share one shape, a page-sized slot, and a few wiped slots are
/// kept for reuse: mapping, guarding and locking a fresh allocation takes five syscalls and
/// freeing it five more, which was a quarter of a mounted daemon's time serving small items.
/// A small allocation is placed at the end of its slot, against the guard page, where
/// `sodium_malloc` itself would put it, so an overrun still faults.
enum SecureMemory {
    static let slotSize = 4096
    /// At most this many wiped slots wait for reuse (each keeps two pages locked): enough for the
    /// content blocks (one slot each, `ItemContent`) of a read of a few hundred KiB.
    static let keptSlots = 64

    private static let spareSlots = OrderedMutex<[UInt]>(.secureMemorySlots, [])

    /// `size` zeroed bytes of locked memory.
    static func allocate(_ size: Int) throws(VaultError) -> UnsafeMutableRawPointer {
        precondition(size > 0, "empty allocation")
        guard size <= slotSize else { return try fresh(size) }
        let spare = spareSlots.withLock { $0.popLast() }.flatMap { UnsafeMutableRawPointer(bitPattern: $0) }
        let slot: UnsafeMutableRawPointer
        if let spare { slot = spare } else { slot = try fresh(slotSize) }
        return slot + (slotSize - size)
    }

    /// Wipes and releases what `allocate(size)` returned.
    static func free(_ pointer: UnsafeMutableRawPointer, size: Int) {
        guard size <= slotSize else {
            sodium_memzero(pointer, size)
            sodium_free(pointer)
            return
        }
        let slot = pointer - (slotSize - size)
        sodium_memzero(slot, slotSize)
        let kept = spareSlots.withLock { spares in
            guard spares.count < keptSlots else { return false }
            spares.append(UInt(bitPattern: slot))
            return true
        }
        if !kept { sodium_free(slot) }
    }

    private static func fresh(_ size: Int) throws(VaultError) -> UnsafeMutableRawPointer {
        Sodium.ensureInitialized()
        guard let pointer = sodium_malloc(size) else {
            throw .secureMemoryUnavailable("sodium_malloc of \(size) bytes failed")
        }
        // sodium_malloc does not report a failed mlock; check it ourselves so secrets never
        // silently land in swappable memory once RLIMIT_MEMLOCK is reached.
        guard sodium_mlock(pointer, size) == 0 else {
            sodium_free(pointer)
            throw .secureMemoryUnavailable("mlock of \(size) bytes failed: RLIMIT_MEMLOCK reached")
        }
        sodium_memzero(pointer, size)
        return pointer
    }
}
