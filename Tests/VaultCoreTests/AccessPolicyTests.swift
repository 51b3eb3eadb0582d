import Foundation
import Glibc
import Testing
import VaultCore

/// Decisions of an access policy for this test process, whose executable and unit are real.
@Suite struct AccessPolicyTests {
    let me = ProcessIdentity(pid: getpid())
    let myExecutable: Principal
    let someoneElse = try! Principal.executable(at: "/usr/bin/head")

    init() throws {
        myExecutable = try Principal.executable(at: try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe"))
    }

    func deniedAsUnadmitted(_ decision: AccessDecision) -> Bool {
        if case .deny(.noRuleAdmits(let pid, let executable, _)) = decision {
            return pid == getpid() && executable == me.executable?.path
        }
        return false
    }

    @Test func withoutRulesEverythingIsAllowed() {
        let policy = AccessPolicy.empty
        #expect(!policy.hasAnyRules)
        #expect(!policy.isRuled(path("app/token")))
        for access in [Access.read, .list, .write] {
            #expect(policy.decide(path: path("app/token"), identity: me, access: access) == .allow)
        }
        // An identity that is never asked costs no /proc read: a pid that cannot exist still gets .allow.
        #expect(policy.decide(path: path("a"), identity: ProcessIdentity(pid: -1), access: .write) == .allow)
    }

    @Test func aRuleSetCoversEverythingBelowItsDictionary() {
        let policy = AccessPolicy([(path("app"), [AccessRule(someoneElse)])])
        #expect(policy.hasAnyRules)
        #expect(policy.isRuled(path("app")) && policy.isRuled(path("app/token")) && policy.isRuled(path("app/deep/er/token")))
        #expect(!policy.isRuled(path("other/token")) && !policy.isRuled(path("ap")) && !policy.isRuled(.root))
        #expect(deniedAsUnadmitted(policy.decide(path: path("app/deep/token"), identity: me, access: .read)))
        #expect(deniedAsUnadmitted(policy.decide(path: path("app"), identity: me, access: .list)))
        #expect(policy.decide(path: path("other/token"), identity: me, access: .write) == .allow)
        #expect(policy.decide(path: path("apps/token"), identity: me, access: .write) == .allow)
    }

    @Test func theNearestRuleSetDecidesAlone() {
        let policy = AccessPolicy([
            (path("app"), [AccessRule(myExecutable)]),
            (path("app/locked"), [AccessRule(someoneElse)]),
            (path("app/locked/open"), [AccessRule(myExecutable, readOnly: true)]),
        ])
        #expect(policy.decide(path: path("app/token"), identity: me, access: .write) == .allow)
        // The rule above admits us; the nearer one does not, and is not merged with it.
        #expect(deniedAsUnadmitted(policy.decide(path: path("app/locked/token"), identity: me, access: .read)))
        #expect(policy.decide(path: path("app/locked/open/token"), identity: me, access: .read) == .allow)
        #expect(policy.ruleSet(governing: path("app/locked/x"))?.path == path("app/locked"))
        #expect(policy.ruleSet(governing: path("app/locked/open/x/y"))?.path == path("app/locked/open"))
        #expect(Set(policy.ruledPaths(below: path("app"))) == [path("app/locked"), path("app/locked/open")])
        #expect(policy.ruledPaths(below: path("app/locked/open")).isEmpty)
        #expect(policy.ruledPaths(below: .root).count == 3)
    }

    @Test func aRuleOnAnItemCoversThatItemOnly() {
        let policy = AccessPolicy([(path("app/token"), [AccessRule(someoneElse)])])
        #expect(deniedAsUnadmitted(policy.decide(path: path("app/token"), identity: me, access: .read)))
        #expect(policy.decide(path: path("app/token2"), identity: me, access: .read) == .allow)
        #expect(policy.decide(path: path("app"), identity: me, access: .list) == .allow)
        #expect(policy.ruledPaths(below: path("app")) == [path("app/token")])
    }

    @Test func readOnlyPrincipalsReadAndListButNeverWrite() {
        let rule = AccessRule(myExecutable, readOnly: true)
        let policy = AccessPolicy([(path("app"), [rule])])
        #expect(policy.decide(path: path("app/token"), identity: me, access: .read) == .allow)
        #expect(policy.decide(path: path("app"), identity: me, access: .list) == .allow)
        let decision = policy.decide(path: path("app/token"), identity: me, access: .write)
        guard case .deny(let denial) = decision, case .readOnly(let pid, _, _) = denial else {
            Issue.record("expected a read-only denial, got \(decision)")
            return
        }
        #expect(pid == getpid())
        #expect(denial.description.contains("may only read"))
        // Another rule admitting the same process with writes wins over the read-only one.
        let both = AccessPolicy([(path("app"), [rule, AccessRule(myExecutable)])])
        #expect(both.decide(path: path("app/token"), identity: me, access: .write) == .allow)
    }

    @Test func confirmationIsAskedOnlyWhenNoRuleAllowsOutright() {
        let confirm = AccessRule(myExecutable, confirm: true)
        #expect(AccessPolicy([(path("app"), [confirm])]).decide(path: path("app/t"), identity: me, access: .read) == .confirm(confirm))
        #expect(AccessPolicy([(path("app"), [confirm, AccessRule(myExecutable, readOnly: true)])])
            .decide(path: path("app/t"), identity: me, access: .read) == .allow)
        #expect(AccessPolicy([(path("app"), [confirm, AccessRule(myExecutable, readOnly: true)])])
            .decide(path: path("app/t"), identity: me, access: .write) == .confirm(confirm))
        let readOnlyConfirm = AccessRule(myExecutable, readOnly: true, confirm: true)
        guard case .deny(.readOnly) = AccessPolicy([(path("app"), [readOnlyConfirm])])
            .decide(path: path("app/t"), identity: me, access: .write) else {
            Issue.record("a read-only rule asks nobody about a write")
            return
        }
    }

    @Test func aRuleSetWithoutRulesAdmitsNobodyAndARuleTwiceIsOneSet() {
        let policy = AccessPolicy([(path("vault"), []), (path("app"), [AccessRule(someoneElse)]), (path("app"), [AccessRule(myExecutable)])])
        #expect(deniedAsUnadmitted(policy.decide(path: path("vault/x"), identity: me, access: .read)))
        #expect(policy.decide(path: path("app/x"), identity: me, access: .write) == .allow)
        #expect(policy.ruleSets.map(\.path) == [path("vault"), path("app")])
        #expect(policy.ruleSets[1].rules == [AccessRule(someoneElse), AccessRule(myExecutable)])
    }

    @Test func aRuleAtTheRootGovernsTheWholeVault() {
        let policy = AccessPolicy([(.root, [AccessRule(someoneElse)])])
        #expect(policy.isRuled(path("anything/at/all")))
        #expect(deniedAsUnadmitted(policy.decide(path: .root, identity: me, access: .list)))
    }

    @Test func aProcessThatIsGoneIsAdmittedByNoRule() throws {
        let child = try ChildProcess("/usr/bin/sleep", ["60"])
        let gone = ProcessIdentity(pid: child.pid)
        child.end()
        let policy = AccessPolicy([(path("app"), [AccessRule(try Principal.executable(at: "/usr/bin/sleep"))])])
        let decision = policy.decide(path: path("app/t"), identity: gone, access: .read)
        #expect(decision == .deny(.noRuleAdmits(pid: child.pid, executable: nil, unit: nil)))
    }

    @Test func denialsNameTheProcessAndNeverThePath() {
        let policy = AccessPolicy([(path("SECRET-DICT"), [AccessRule(someoneElse)])])
        guard case .deny(let denial) = policy.decide(path: path("SECRET-DICT/SECRET-ITEM"), identity: me, access: .read) else {
            Issue.record("expected a denial")
            return
        }
        #expect(denial.description.contains("process \(getpid())"))
        #expect(denial.description.contains(me.executable!.path))
        #expect(!denial.description.contains("SECRET"))
    }
}
