import Testing

/// What a suite costs, so a quick run can leave out the heavy ones (`scripts/test --fast`
/// skips `slow`, reading the tags from the built tests).
extension Tag {
    /// Takes more than about 3 s on a 2-core machine.
    @Tag static var slow: Self
}
