/// Why an access log batch is refused: each is an integrity failure, reported by `log` and
/// `verify`, never skipped.
enum AccessLogDefect: Error, Equatable, CustomStringConvertible {
    case failedAuthentication
    case malformed
    case otherVault
    case moved(sealedAs: Int64)
    case clearColumnsDisagree
    case malformedRow
    case missingBatches(after: Int64, next: Int64)
    /// Format 11 on: the digest kept in front of the sealed box is not the batch's.
    case digestEdited
    /// The batch does not name the digest of the batch before it.
    case chainBroken(after: Int64)
    /// An unchained batch in a vault whose batches are all chained.
    case unchained
    /// The signature is not the key's that the batch names.
    case badSignature
    /// Signed as a member whose slot names another key, or none.
    case notSignedByMember(String)
    /// This machine saw this batch (`SeenLogHeads`), and the log now ends at `after`.
    case newestDeleted(after: Int64)
    /// This machine saw another batch at this sequence.
    case replacedSinceSeen

    var description: String {
        switch self {
        case .failedAuthentication: "failed authentication"
        case .malformed: "authenticated but malformed"
        case .otherVault: "belongs to another vault"
        case .moved(let sealed): "was sealed as batch \(sealed) (moved or copied)"
        case .clearColumnsDisagree: "its times or entry count were edited"
        case .malformedRow: "malformed row"
        case .missingBatches(let after, let next): "batches between \(after) and \(next) were deleted"
        case .digestEdited: "its digest was edited"
        case .chainBroken(let after): "does not follow batch \(after) (a batch was replaced, reordered or deleted)"
        case .unchained: "is not chained to the batch before (written outside keychainfs)"
        case .badSignature: "its signature does not hold (forged or edited)"
        case .notSignedByMember(let name): "claims member \(name) but is not signed with that member's key (forged)"
        case .newestDeleted(let after): "was seen by this machine, and the log now ends at batch \(after): the newest batches were deleted"
        case .replacedSinceSeen: "is not the batch this machine saw at that place: it was replaced"
        }
    }
}
