/// `keychainfs --version`. One constant, changed by hand with each release: SwiftPM has no
/// simple way to stamp a build with `git describe`, and a version that depends on the checkout
/// would differ between a tarball and a clone of the same source.
enum KeychainFSVersion {
    static let current = "0.12.0"
}
