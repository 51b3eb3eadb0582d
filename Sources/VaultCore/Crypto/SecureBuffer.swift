import CSodium

/// The single owner of secret bytes: memory from `sodium_malloc` (guard pages, canary),
/// locked into RAM, wiped with `sodium_memzero` before it is freed (SecureMemory).
///
/// Non-copyable so a secret has exactly one owner; bytes are reachable only inside closures
/// so no Swift array or string copy of them is ever needed.
public struct SecureBuffer: ~Copyable, @unchecked Sendable {
    /// nil while the capacity is 0: an empty buffer (a new file) costs no guarded mapping.
    private var base: UnsafeMutableRawPointer?
    /// Bytes usable without reallocating.
    public private(set) var capacity: Int
    /// Bytes that hold data; the rest of the capacity is zero.
    public private(set) var count: Int

    /// Allocates `capacity` zeroed bytes of locked memory.
    public init(capacity: Int) throws(VaultError) {
        precondition(capacity >= 0, "negative capacity")
        base = capacity == 0 ? nil : try SecureMemory.allocate(capacity)
        self.capacity = capacity
        count = 0
    }

    /// An empty buffer: no memory until it grows.
    public init() {
        base = nil
        capacity = 0
        count = 0
    }

    /// A buffer holding a copy of `bytes` (for material that is already outside, such as a
    /// buffer the kernel handed over, which the caller then wipes).
    public init(copying bytes: UnsafeRawBufferPointer) throws(VaultError) {
        try self.init(capacity: bytes.count)
        if let src = bytes.baseAddress, let base, bytes.count > 0 { base.copyMemory(from: src, byteCount: bytes.count) }
        count = bytes.count
    }

    deinit {
        guard let base else { return }
        SecureMemory.free(base, size: capacity)
    }

    /// Reads the data bytes.
    public func withUnsafeBytes<R: ~Copyable, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(start: base, count: count))
    }

    /// Reads the first `length` bytes of the capacity: the data, then zeros (a padded copy
    /// without a second buffer).
    public func withPaddedBytes<R: ~Copyable, E: Error>(_ length: Int, _ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        precondition(length >= count && length <= capacity, "padding outside the capacity")
        return try body(UnsafeRawBufferPointer(start: base, count: length))
    }

    /// Writes into the whole capacity; `body` returns the new data count.
    public mutating func withUnsafeMutableStorage<E: Error>(
        _ body: (UnsafeMutableRawBufferPointer) throws(E) -> Int
    ) throws(E) {
        let newCount: Int
        do {
            newCount = try body(UnsafeMutableRawBufferPointer(start: base, count: capacity))
        } catch {
            // Keep the promise that bytes past `count` are zero, whatever the closure wrote.
            if let base { sodium_memzero(base + count, capacity - count) }
            throw error
        }
        precondition(newCount >= 0 && newCount <= capacity, "count outside capacity")
        setCount(newCount)
    }

    /// Changes the data count; bytes beyond the new count are wiped, bytes gained read as zero.
    public mutating func setCount(_ newCount: Int) {
        precondition(newCount >= 0 && newCount <= capacity, "count outside capacity")
        if newCount < count, let base { sodium_memzero(base + newCount, count - newCount) }
        count = newCount
    }

    /// Grows the capacity to at least `minimumCapacity`, moving the data to new locked memory
    /// and wiping the old.
    public mutating func reserve(_ minimumCapacity: Int) throws(VaultError) {
        guard minimumCapacity > capacity else { return }
        let newCapacity = max(minimumCapacity, capacity * 2)
        let newBase = try SecureMemory.allocate(newCapacity)
        if let base {
            if count > 0 { newBase.copyMemory(from: base, byteCount: count) }
            SecureMemory.free(base, size: capacity)
        }
        base = newBase
        capacity = newCapacity
    }

    /// Copies `bytes` to `offset`, growing as needed; a gap between the old end and `offset`
    /// reads as zeros (a hole).
    public mutating func write(_ bytes: UnsafeRawBufferPointer, at offset: Int) throws(VaultError) {
        precondition(offset >= 0, "negative offset")
        let (end, overflow) = offset.addingReportingOverflow(bytes.count)
        precondition(!overflow, "offset overflows")
        try reserve(end)
        if let src = bytes.baseAddress, let base, bytes.count > 0 { (base + offset).copyMemory(from: src, byteCount: bytes.count) }
        if end > count { count = end }
    }

    /// Truncates (wiping the cut bytes) or extends with zeros, as ftruncate does.
    public mutating func resize(to newCount: Int) throws(VaultError) {
        precondition(newCount >= 0, "negative size")
        try reserve(newCount)
        setCount(newCount)
    }

    /// Appends raw bytes.
    public mutating func append(_ bytes: UnsafeRawBufferPointer) throws(VaultError) {
        try write(bytes, at: count)
    }

    /// Constant-time comparison of the data bytes.
    public func hasSameBytes(as other: borrowing SecureBuffer) -> Bool {
        guard count == other.count else { return false }
        guard count > 0, let base else { return true }
        return other.withUnsafeBytes { o in sodium_memcmp(base, o.baseAddress!, count) == 0 }
    }
}

/// libsodium must be initialised once before use; every entry point that allocates or
/// encrypts goes through here.
public enum Sodium {
    private static let initialized: Bool = sodium_init() >= 0

    public static func ensureInitialized() {
        precondition(initialized, "libsodium failed to initialise")
    }
}
