import CSodium

/// Plaintext of 15 bytes or less is held inline in Swift values (small strings, enum payloads,
/// tuples), so it passes through the stack of every thread that handles it and stays in the
/// dead frames below the thread's loop once the request is answered: wiping buffers never
/// reaches it. A thread that handled plaintext calls `here()` from its loop, below which every
/// frame of the work it did lies.
enum StackWipe {
    /// Deeper than any request goes below a loop (the deepest seen, a READ through the mount
    /// of an item stored by the CLI, reaches about 20 KiB); zeroing it takes a few µs.
    static let depth = 64 * 1024

    static func here() {
        sodium_stackzero(depth)
    }
}
