// The process runner, `eventually`, `FixtureError` and `PostgresServer` are shared with
// VaultCoreTests' storage contract suite; every file here sees them through this one import.
@_exported import TestSupport
