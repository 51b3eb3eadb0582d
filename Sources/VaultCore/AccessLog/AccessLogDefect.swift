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

    var description: String {
        switch self {
        case .failedAuthentication: "failed authentication"
        case .malformed: "authenticated but malformed"
        case .otherVault: "belongs to another vault"
        case .moved(let sealed): "was sealed as batch \(sealed) (moved or copied)"
        case .clearColumnsDisagree: "its times or entry count were edited"
        case .malformedRow: "malformed row"
        case .missingBatches(let after, let next): "batches between \(after) and \(next) were deleted"
        }
    }
}
