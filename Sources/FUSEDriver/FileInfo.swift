import CFuse

/// A copy of the kernel's open flags and libfuse's file info for a request answered later
/// (after a confirmation): libfuse's own lives on the stack of the call that handed it over.
struct FileInfo: @unchecked Sendable {
    let value: fuse_file_info

    init(_ value: fuse_file_info) { self.value = value }
}
