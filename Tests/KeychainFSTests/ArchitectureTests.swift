import Foundation
@testable import Locking
import Testing

/// docs/architecture.md stays true: its module table is Package.swift's graph, every
/// dependency points down a layer, and its lock order is `LockRank`'s.
@Suite struct ArchitectureTests {
    private struct Module {
        let layer: Int
        let dependencies: Set<String>
    }

    private func page() throws -> String {
        try String(contentsOfFile: packageRoot + "/docs/architecture.md", encoding: .utf8)
    }

    private func rows(_ text: String, headedBy header: String) -> [[String]] {
        text.split(separator: "\n").drop { !$0.hasPrefix(header) }.dropFirst(2).prefix { $0.hasPrefix("|") }
            .map { $0.split(separator: "|", omittingEmptySubsequences: false).dropFirst().dropLast()
                .map { $0.trimmingCharacters(in: .whitespaces) } }
    }

    private func names(_ cell: String) -> [String] {
        cell.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
    }

    /// The documented modules: each target with its layer and what it depends on.
    private func documented() throws -> [String: Module] {
        var modules: [String: Module] = [:]
        for row in rows(try page(), headedBy: "| layer | target |") {
            for target in names(row[1]) {
                modules[target] = Module(layer: Int(row[0]) ?? -1, dependencies: Set(names(row[2])))
            }
        }
        return modules
    }

    /// Package.swift's targets and their dependencies, as SwiftPM reads them (test targets aside).
    private func declared() throws -> [String: Set<String>] {
        let scratch = NSTemporaryDirectory() + "kfs-dump-package-" + UUID().uuidString
        defer { try? FileManager.default.removeItem(atPath: scratch) }
        let swift = ProcessInfo.processInfo.environment["PATH"].flatMap { path in
            path.split(separator: ":").map { $0 + "/swift" }.first { FileManager.default.isExecutableFile(atPath: $0) }
        } ?? "/opt/swift/usr/bin/swift"
        let result = try run(swift, ["package", "--scratch-path", scratch, "dump-package"], directory: packageRoot)
        try #require(result.status == 0, "\(result.stderr)")
        let json = try JSONSerialization.jsonObject(with: result.stdout) as? [String: Any]
        var targets: [String: Set<String>] = [:]
        for target in json?["targets"] as? [[String: Any]] ?? [] {
            guard let name = target["name"] as? String, target["type"] as? String != "test",
                  !((target["path"] as? String)?.hasPrefix("Tests/") ?? false) else { continue }
            let dependencies = (target["dependencies"] as? [[String: Any]] ?? []).compactMap {
                ($0.values.first as? [Any])?.first as? String
            }
            targets[name] = Set(dependencies)
        }
        return targets
    }

    @Test func theModuleTableIsPackageSwiftsGraph() throws {
        let modules = try documented()
        let targets = try declared()
        #expect(Set(modules.keys) == Set(targets.keys))
        for (name, dependencies) in targets {
            #expect(modules[name]?.dependencies == dependencies, "\(name): docs/architecture.md and Package.swift differ")
        }
    }

    @Test func everyDependencyPointsDownALayer() throws {
        let modules = try documented()
        let external = ["SystemPackage": 0, "ArgumentParser": 0]
        for (name, module) in modules {
            for dependency in module.dependencies {
                let below = modules[dependency]?.layer ?? external[dependency]
                #expect(below != nil && below! < module.layer, "\(name) (layer \(module.layer)) depends on \(dependency)")
            }
        }
    }

    @Test func theLockOrderIsLockRanks() throws {
        let documented = rows(try page(), headedBy: "| rank | lock |").map { names($0[1]).first ?? "" }
        #expect(documented == LockRank.allCases.map { "\($0)" })
    }
}
