import Foundation
import Testing
// Internal access only to fill a vault in one transaction (through the same NodeStore steps as
// the public calls, which each commit durably); the search itself goes through the public API.
@testable import VaultCore

@Suite(.tags(.slow)) struct FindScaleTests {
    /// `items` items in 100 dictionaries, item i with service=svc(i % 100); those of svc42 also
    /// with account=user(i % 7) (on every item it would only make filling slower).
    private func fill(_ vault: Vault, items: Int) throws {
        try vault.writing { (store) throws(VaultError) in
            let service = try AttributeName("service"), account = try AttributeName("account")
            var dictionaries: [NodeRecord] = []
            for d in 0..<100 {
                let node = try store.insertDictionary(named: try ItemName("d\(d)"), in: try store.existingRecord(.root), mode: 0o700)
                dictionaries.append(try store.existingRecord(node.id))
            }
            for i in 0..<items {
                let node = try store.insertItem(named: try ItemName("s\(i)"), in: dictionaries[i * 100 / items], mode: 0o600,
                                                content: secret("secret \(i)"))
                let record = try store.existingRecord(node.id)
                try store.putAttribute(service, secret("svc\(i % 100)"), on: record, mode: .create)
                if i % 100 == 42 { try store.putAttribute(account, secret("user\(i % 7)"), on: record, mode: .create) }
            }
        }
    }

    @Test func findOnAHundredThousandItemsTakesWellUnderASecond() throws {
        let scratch = Scratch()
        let vault = try makeVault(scratch)
        let items = 100_000
        let filling = ContinuousClock.now
        try fill(vault, items: items)
        print("filled \(items) items in \(ContinuousClock.now - filling)")

        let reopened = try reopen(scratch)
        let clock = ContinuousClock()
        var found: [VaultPath] = []
        let oneMatch = try clock.measure { found = try reopened.find([pair("service", "svc42")]) }
        #expect(found.count == items / 100)
        #expect(Set(found.map(\.description)) == Set(stride(from: 42, to: items, by: 100).map { "d\($0 * 100 / items)/s\($0)" }))
        var both: [VaultPath] = []
        let twoPairs = try clock.measure { both = try reopened.find([pair("service", "svc42"), pair("account", "user3")]) }
        #expect(both.count == stride(from: 42, to: items, by: 100).filter { $0 % 7 == 3 }.count)
        var none: [VaultPath] = []
        let miss = try clock.measure { none = try reopened.find([pair("service", "svc100")]) }
        #expect(none.isEmpty)
        print("find on \(items) items: \(found.count) matches in \(oneMatch), two pairs \(twoPairs), no match \(miss)")
        #expect(oneMatch < .seconds(1) && twoPairs < .seconds(1) && miss < .milliseconds(50))
    }
}
