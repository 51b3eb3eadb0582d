import VaultCore

/// A request's data (an attribute value) copied into locked memory, so it can be served after
/// a confirmation when the kernel's buffer has been wiped and reused. Wiped when released.
final class RequestValue: Sendable {
    private let bytes: SecureBuffer

    init(copying source: UnsafeRawBufferPointer) throws(VaultError) {
        bytes = try SecureBuffer(copying: source)
    }

    func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try bytes.withUnsafeBytes(body)
    }
}
