import ArgumentParser
import VaultCore

/// `--kdf` of init, mount and passwd.
extension KDFPreset: ExpressibleByArgument {}
