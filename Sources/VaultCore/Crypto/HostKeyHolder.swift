/// What holds this machine's host key (the key of this-device-only items), as `status` says it.
public enum HostKeyHolder: Equatable, Sendable {
    /// Sealed by the TPM that `configuration` names (nil: none answers here), its sealed
    /// object in the file `sealedObject`.
    case tpm(configuration: String?, sealedObject: String)
    /// A file of its own; `tpm` when a TPM answers but the file was made first and stays.
    case file(String, tpm: Bool)

    public var description: String {
        switch self {
        case .tpm(let configuration?, let sealedObject):
            "sealed by the TPM (\(configuration)), sealed object \(sealedObject)"
        case .tpm(nil, let sealedObject):
            "sealed by a TPM, but none answers here (sealed object \(sealedObject))"
        case .file(let path, let tpm):
            "host key file \(path) (" + (tpm ? "made before a TPM was used; it stays" : "no TPM") + ")"
        }
    }
}
