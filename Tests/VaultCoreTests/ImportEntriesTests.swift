import Foundation
import Testing
import VaultCore

/// `importEntries` stores a batch as one transaction, and `exportEntries` gives back what it stored.
@Suite struct ImportEntriesTests {
    private func attribute(_ name: String, _ value: String) -> Attribute {
        Attribute(name: try! AttributeName(name), value: secret(value))
    }

    /// Every entry of the vault as text: path, kind, class, content, attributes, label, content type, rules.
    private func describe(_ vault: Vault) throws -> [String] {
        var lines: [String] = []
        try vault.exportEntries { (entry, _) throws(VaultError) in
            var line = "\(entry.path) \(entry.kind) \(entry.accessibility.map(\.description) ?? "-")"
            switch entry.content {
            case .some(let content): line += " content=" + String(decoding: content.testBytes, as: UTF8.self)
            case .none: break
            }
            for attribute in entry.attributes {
                line += " \(attribute.name)=" + String(decoding: attribute.value.testBytes, as: UTF8.self)
            }
            switch entry.label {
            case .some(let label): line += " label=" + String(decoding: label.testBytes, as: UTF8.self)
            case .none: break
            }
            switch entry.contentType {
            case .some(let type): line += " type=" + String(decoding: type.testBytes, as: UTF8.self)
            case .none: break
            }
            line += entry.rules.map { " rule " + $0.description }.joined()
            lines.append(line)
        }
        return lines
    }

    @Test(arguments: StorageEngine.all)
    func aBatchRoundTripsThroughExport(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        let unit = try Principal.unit(named: "backup.service")
        try vault.importEntries([
            PortableEntry(dictionary: path("app"), attributes: [attribute("team", "ops")], label: secret("App"),
                          defaultClass: .afterFirstUnlock, rules: [AccessRule(unit, readOnly: true)]),
            PortableEntry(item: path("app/token"), content: secret("t0k3n"), attributes: [attribute("service", "gh")],
                          label: secret("Token"), contentType: secret("text/plain"), rules: [AccessRule(unit, confirm: true)]),
            PortableEntry(item: path("deep/er/key"), content: secret("k"), accessibility: .whenUnlocked),
        ], replacing: false)
        let second = try Scratch(engine)
        let copy = try makeVault(second)
        var entries: [PortableEntry] = []
        let skipped = try vault.exportEntries(excluding: [.thisDeviceOnly]) { (entry, _) throws(VaultError) in entries.append(entry) }
        #expect(skipped == 0)
        try copy.importEntries(entries, replacing: false)
        let expected = [
            "/ dictionary -",
            "app dictionary after-first-unlock team=ops label=App rule --unit backup.service --read-only",
            // A new item takes its dictionary's default class.
            "app/token item after-first-unlock content=t0k3n service=gh label=Token type=text/plain rule --unit backup.service --confirm",
            "deep dictionary -",
            "deep/er dictionary -",
            "deep/er/key item when-unlocked content=k",
        ]
        #expect(try describe(vault) == expected)
        #expect(try describe(copy) == expected)
    }

    @Test(arguments: StorageEngine.all)
    func aFailureLeavesTheVaultAsItWasAndNamesTheEntry(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        try vault.store(secret("keep"), at: path("b"))
        let before = try describe(vault)
        do {
            try vault.importEntries([
                PortableEntry(item: path("a"), content: secret("1")),
                PortableEntry(item: path("b"), content: secret("2")),
                PortableEntry(item: path("c"), content: secret("3")),
            ], replacing: false)
            Issue.record("an existing item was replaced without replacing")
        } catch {
            #expect(error.entry == path("b"))
            guard case .alreadyExists = error.error else { throw error }
        }
        #expect(try describe(vault) == before)
        #expect(try describe(reopen(scratch)) == before)
        // Over the item size limit in the middle: nothing either.
        let small = try Scratch(engine)
        let limited = try makeVault(small, itemSizeLimit: 4)
        #expect(throws: ImportFailure.self) {
            try limited.importEntries([PortableEntry(item: path("x/ok"), content: secret("ok")),
                                       PortableEntry(item: path("x/big"), content: secret("too big"))], replacing: false)
        }
        #expect(try describe(limited) == ["/ dictionary -"])
    }

    @Test(arguments: StorageEngine.all)
    func replacingReplacesAnItemWhole(engine: StorageEngine) throws {
        let scratch = try Scratch(engine)
        let vault = try makeVault(scratch)
        try vault.store(secret("old"), at: path("d/i"), attributes: [attribute("old", "1")])
        try vault.setProperty(.label, to: secret("Old"), at: path("d/i"))
        try vault.importEntries([PortableEntry(item: path("d/i"), content: secret("new"), attributes: [attribute("new", "2")],
                                               accessibility: .afterFirstUnlock)], replacing: true)
        #expect(try describe(vault) == ["/ dictionary -", "d dictionary -", "d/i item after-first-unlock content=new new=2"])
    }
}
