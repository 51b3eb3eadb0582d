import Testing

/// What a suite needs or costs, so a quick run can leave out the heavy ones (`scripts/test
/// --fast` skips `slow`, `postgres` and `manPage`, reading the tags from the built tests).
extension Tag {
    /// Mounts something (the vault through FUSE, or a tmpfs): needs root and /dev/fuse.
    @Tag static var mount: Self
    /// Starts a PostgreSQL server of its own.
    @Tag static var postgres: Self
    /// Starts a software TPM of its own (swtpm).
    @Tag static var tpm: Self
    /// Starts a private D-Bus daemon.
    @Tag static var bus: Self
    /// Takes more than about 3 s on a 2-core machine.
    @Tag static var slow: Self
    /// Needs swift-argument-parser's generate-manual built (`swift build --product generate-manual`).
    @Tag static var manPage: Self
}
