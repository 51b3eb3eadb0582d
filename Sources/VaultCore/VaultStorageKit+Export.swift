// VaultError, NodeID, NodeKind and the other public types the storage protocol speaks live in
// VaultStorageKit, below the engines; VaultCore's users keep finding them in VaultCore.
@_exported import VaultStorageKit
