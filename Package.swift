// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "KeychainFS",
    products: [
        .executable(name: "keychainfs", targets: ["KeychainFS"]),
        .library(name: "VaultCore", targets: ["VaultCore"]),
        // libpam_keychainfs.so, installed as pam_keychainfs.so by scripts/setup.
        .library(name: "pam_keychainfs", type: .dynamic, targets: ["PAMModule"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2"),
        .package(url: "https://github.com/apple/swift-system", exact: "1.8.1"),
    ],
    targets: [
        // C shims: module maps and static inline wrappers of macros, nothing else.
        .systemLibrary(name: "CSodium", pkgConfig: "libsodium", providers: [.apt(["libsodium-dev"])]),
        .systemLibrary(name: "CSQLite", pkgConfig: "sqlite3", providers: [.apt(["libsqlite3-dev"])]),
        .systemLibrary(name: "CFuse", pkgConfig: "fuse3", providers: [.apt(["libfuse3-dev"])]),
        .systemLibrary(name: "CSystemd", pkgConfig: "libsystemd", providers: [.apt(["libsystemd-dev"])]),
        .systemLibrary(name: "CLinux"),
        .systemLibrary(name: "CCrypto", pkgConfig: "libcrypto", providers: [.apt(["libssl-dev"])]),
        .systemLibrary(name: "CPostgres", pkgConfig: "libpq", providers: [.apt(["libpq-dev"])]),
        .systemLibrary(name: "CPAM", providers: [.apt(["libpam0g-dev"])]),
        .systemLibrary(name: "CTPM", pkgConfig: "tss2-esys", providers: [.apt(["libtss2-dev"])]),
        .systemLibrary(name: "CURing", pkgConfig: "liburing", providers: [.apt(["liburing-dev"])]),

        // System calls as typed values: swift-system's descriptors and Errno, EINTR and short
        // reads and writes handled once, files that appear whole or not at all.
        .target(name: "SystemCalls", dependencies: ["CLinux", .product(name: "SystemPackage", package: "swift-system")]),
        // Mutexes with their place in the one lock order, checked by debug builds.
        .target(name: "Locking"),
        // The storage protocol and the rows it speaks (ciphertext, tags, ids): what VaultCore's
        // record layer and the engines share. The engines know nothing else of VaultCore, and
        // VaultCore no SQL: only the engines see CSQLite and CPostgres.
        .target(name: "VaultStorageKit"),
        // Sealing a secret to the TPM (tpm2-tss ESAPI): what keeps this-device-only items' host
        // key on this machine's chip when it has one. Knows nothing of vaults.
        .target(name: "TPMSeal", dependencies: ["CTPM", "CSodium"]),
        .target(name: "StorageSQLite", dependencies: ["SystemCalls", "VaultStorageKit", "CSQLite"]),
        .target(name: "StoragePostgres", dependencies: ["SystemCalls", "VaultStorageKit", "CPostgres"]),
        .target(name: "VaultCore", dependencies: [
            "Locking", "SystemCalls", "VaultStorageKit", "StorageSQLite", "StoragePostgres", "TPMSeal", "CSodium", "CLinux",
        ]),

        // The daemon's layers, each a module: an import that points up a layer does not compile.
        // Shared by every layer above the vault: threads, terminal, passphrase input, the log, failures.
        .target(name: "Support", dependencies: ["Locking", "SystemCalls", "VaultCore", "CSodium", "CLinux", "CSystemd"]),
        // sd-bus: messages, calls and errors, and objects declared once; knows nothing of secrets.
        .target(name: "DBus", dependencies: ["Locking", "SystemCalls", "Support", "VaultCore", "CSystemd"]),
        // Who is asking, the rules, the user's confirmation and the access log: one door for every way in.
        .target(name: "Admission", dependencies: ["Locking", "SystemCalls", "VaultCore", "Support", "CLinux"]),
        // The FUSE low-level driver: POSIX calls onto the vault, through Admission.
        .target(name: "FUSEDriver", dependencies: ["Locking", "SystemCalls", "Admission", "VaultCore", "Support", "CFuse", "CLinux", "CSodium", "CURing"]),
        // The freedesktop Secret Service: D-Bus calls onto the vault, through Admission.
        .target(name: "Keyring", dependencies: ["Locking", "DBus", "Admission", "VaultCore", "Support", "CCrypto", "CSodium"]),
        // Lifecycle: mounting, the control socket, lock triggers, the service manager.
        .target(name: "Daemon", dependencies: [
            "FUSEDriver", "Keyring", "DBus", "Admission", "VaultCore", "Support", "SystemCalls", "CFuse", "CLinux", "CSystemd", "CSodium",
        ]),
        // The command line: argument parsing and exit statuses, nothing more.
        .executableTarget(
            name: "KeychainFS",
            dependencies: [
                "Daemon", "Keyring", "FUSEDriver", "Admission", "Support", "VaultCore", "SystemCalls", "CLinux", "CSodium",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),

        // The PAM module: libpam's entry points, the login password in locked memory, and
        // `keychainfs pam-...` run for everything else. Loaded into login, gdm and sshd, so it
        // carries its own Swift runtime (-static-stdlib: nothing to find at load time) and is
        // never unmapped (-z nodelete: the runtime's thread-exit and atexit hooks outlive pam_end).
        .target(
            name: "PAMModule",
            dependencies: ["CPAM", "CSodium"],
            linkerSettings: [.unsafeFlags(["-static-stdlib", "-Xlinker", "-z", "-Xlinker", "nodelete"])]
        ),

        // What the test targets share: running programs, a PostgreSQL server of their own, and
        // the one way per engine to reach a vault's raw rows (StorageEngine, RawRows).
        .target(name: "TestSupport", dependencies: ["CSQLite", "CPostgres"], path: "Tests/TestSupport"),
        .testTarget(name: "LockingTests", dependencies: ["Locking"]),
        .testTarget(name: "SystemCallsTests", dependencies: ["SystemCalls", .product(name: "SystemPackage", package: "swift-system")]),
        .testTarget(name: "VaultCoreTests", dependencies: [
            "VaultCore", "TestSupport", "StorageSQLite", "StoragePostgres", "CSQLite", "CSodium",
            .product(name: "SystemPackage", package: "swift-system"),
        ]),
        .testTarget(name: "KeychainFSTests", dependencies: [
            "KeychainFS", "Daemon", "Keyring", "FUSEDriver", "Admission", "DBus", "Support", "VaultCore",
            "TestSupport", "StoragePostgres", "CSQLite", "CLinux", "TPMSeal",
        ]),
    ],
    swiftLanguageModes: [.v6]
)
