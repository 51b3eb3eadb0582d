import Foundation
import Testing

/// No SQL outside the engines. The compiler holds most of it: SQLiteConnection, PostgresConnection
/// and the schemas are internal to StorageSQLite and StoragePostgres, so VaultCore cannot name
/// them. It cannot hold the C modules: SwiftPM lets a target import every module below it, so
/// `import CSQLite` in VaultCore would build (tried). This holds that part.
@Suite struct StorageBoundaryTests {
    @Test func vaultCoreImportsNoDatabaseLibraryAndWritesNoSQL() throws {
        let sources = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../Sources/VaultCore").standardized.path
        let files = try #require(FileManager.default.enumerator(atPath: sources)).compactMap { $0 as? String }.filter { $0.hasSuffix(".swift") }
        #expect(files.count > 50)
        let forbidden = try Regex(#"import\s+(CSQLite|CPostgres)\b|sqlite3_|\bPQ[a-z]+\(|"(SELECT|UPDATE|INSERT|DELETE|CREATE|PRAGMA) "#)
        for file in files {
            let text = try String(contentsOfFile: sources + "/" + file, encoding: .utf8)
            #expect(!text.contains(forbidden), "\(file) reaches a database itself")
        }
    }
}
