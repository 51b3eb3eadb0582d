import CSodium

/// Plaintext of 15 bytes or less is held inline in Swift values (small strings, enum payloads,
/// tuples), so it passes through the stack of every thread that handles it and stays in the
/// dead frames below the thread's loop once the request is answered: wiping buffers never
/// reaches it. A thread that handled plaintext calls `here()` from its loop, below which every
/// frame of the work it did lies.
package enum StackWipe {
    /// Four times what the deepest request measured needs: names of an `ls -l` through the
    /// mount lie between 8 and 16 KiB below the session loop (ShortCanaryWipeTests fails
    /// at 8 KiB, passes at 16). Zeroing 64 KiB takes a few µs.
    package static let depth = 64 * 1024

    package static func here() {
        sodium_stackzero(depth)
    }
}
