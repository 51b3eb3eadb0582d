import Support

/// What a migration reads from, twice: once without secrets to plan (names, and what is here
/// already), then item by item with them as each batch is stored. A large keyring or export is
/// thus never all in locked memory at once: every buffer costs 8 KiB of RLIMIT_MEMLOCK (a page
/// and sodium's canary), and Debian's 8 MiB holds about a thousand.
protocol IncomingSource {
    var dictionaries: [IncomingDictionary] { get }
    /// Item `index` of dictionary `dictionary`; its secret and content type only with `secrets`.
    func item(in dictionary: Int, at index: Int, secrets: Bool) throws(CommandFailure) -> IncomingItem
}
