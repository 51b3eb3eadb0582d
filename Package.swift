// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "KeychainFS",
    products: [
        .executable(name: "keychainfs", targets: ["KeychainFS"]),
        .library(name: "VaultCore", targets: ["VaultCore"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-argument-parser", exact: "1.8.2"),
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

        // The storage protocol and the rows it speaks (ciphertext, tags, ids): what VaultCore's
        // record layer and the engines share. The engines know nothing else of VaultCore, and
        // VaultCore no SQL: only the engines see CSQLite and CPostgres.
        .target(name: "VaultStorageKit"),
        .target(name: "StorageSQLite", dependencies: ["VaultStorageKit", "CSQLite"]),
        .target(name: "StoragePostgres", dependencies: ["VaultStorageKit", "CPostgres"]),
        .target(name: "VaultCore", dependencies: ["VaultStorageKit", "StorageSQLite", "StoragePostgres", "CSodium", "CLinux"]),
        .executableTarget(
            name: "KeychainFS",
            dependencies: [
                "VaultCore", "CFuse", "CSodium", "CLinux", "CCrypto", "CSystemd",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
            ]
        ),

        // What both test targets share: running programs, a PostgreSQL server of their own, and
        // the one way per engine to reach a vault's raw rows (StorageEngine, RawRows).
        .target(name: "TestSupport", dependencies: ["CSQLite", "CPostgres"], path: "Tests/TestSupport"),
        .testTarget(name: "VaultCoreTests", dependencies: ["VaultCore", "TestSupport", "StorageSQLite", "StoragePostgres", "CSQLite", "CSodium"]),
        .testTarget(name: "KeychainFSTests", dependencies: ["KeychainFS", "VaultCore", "TestSupport", "StoragePostgres", "CSQLite", "CLinux"]),
    ],
    swiftLanguageModes: [.v6]
)
