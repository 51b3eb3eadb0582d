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

    /// A tree of nodes: / (1) > app (2) > locked (3) > open (4) > x (5); app > token (6),
    /// app > token2 (7), app > deep (8) > token (9); / > other (10) > token (11).
    static let parents: [Int64: Int64] = [2: 1, 3: 2, 4: 3, 5: 4, 6: 2, 7: 2, 8: 2, 9: 8, 10: 1, 11: 10]
    static let app = NodeID(2), locked = NodeID(3), open = NodeID(4), openX = NodeID(5), token = NodeID(6),
               token2 = NodeID(7), deep = NodeID(8), deepToken = NodeID(9), other = NodeID(10), otherToken = NodeID(11)

    func governing(_ policy: AccessPolicy, _ node: NodeID) -> RuleSet? {
        policy.governing(node) { AccessPolicyTests.parents[$0.rawValue].map(NodeID.init) }
    }

    /// What the mount does: the governing rule set decides; without one, everything is allowed.
    func decide(_ policy: AccessPolicy, _ node: NodeID, _ identity: ProcessIdentity, _ access: Access) -> AccessDecision {
        guard let set = governing(policy, node) else { return .allow }
        return policy.decide(set, identity: identity, access: access)
    }

    func policy(_ sets: (NodeID, [AccessRule])...) -> AccessPolicy {
        AccessPolicy(ruleSets: sets.map { RuleSet(node: $0.0, rules: $0.1) })
    }

    @Test func withoutRulesNothingGovernsAndNothingIsAsked() {
        let policy = AccessPolicy.empty
        #expect(!policy.hasAnyRules)
        var asked = 0
        #expect(policy.governing(AccessPolicyTests.token) { (id: NodeID) -> NodeID? in
            asked += 1
            return AccessPolicyTests.parents[id.rawValue].map(NodeID.init)
        } == nil)
        #expect(asked == 0, "a vault without rules walks no parents")
        #expect(policy.ruleSet(of: .root) == nil)
        for access in [Access.read, .list, .write] {
            #expect(decide(policy, AccessPolicyTests.token, me, access) == .allow)
        }
    }

    @Test func aRuleSetCoversEverythingBelowItsDictionary() {
        let policy = policy((AccessPolicyTests.app, [AccessRule(someoneElse)]))
        #expect(policy.hasAnyRules)
        for node in [AccessPolicyTests.app, AccessPolicyTests.token, AccessPolicyTests.deepToken, AccessPolicyTests.openX] {
            #expect(governing(policy, node)?.node == AccessPolicyTests.app)
        }
        #expect(governing(policy, AccessPolicyTests.otherToken) == nil && governing(policy, .root) == nil)
        #expect(deniedAsUnadmitted(decide(policy, AccessPolicyTests.deepToken, me, .read)))
        #expect(deniedAsUnadmitted(decide(policy, AccessPolicyTests.app, me, .list)))
        #expect(decide(policy, AccessPolicyTests.otherToken, me, .write) == .allow)
    }

    @Test func theNearestRuleSetDecidesAlone() {
        let policy = policy(
            (AccessPolicyTests.app, [AccessRule(myExecutable)]),
            (AccessPolicyTests.locked, [AccessRule(someoneElse)]),
            (AccessPolicyTests.open, [AccessRule(myExecutable, readOnly: true)])
        )
        #expect(decide(policy, AccessPolicyTests.token, me, .write) == .allow)
        // The rule above admits us; the nearer one does not, and is not merged with it.
        #expect(deniedAsUnadmitted(decide(policy, AccessPolicyTests.locked, me, .read)))
        #expect(decide(policy, AccessPolicyTests.openX, me, .read) == .allow)
        #expect(governing(policy, AccessPolicyTests.openX)?.node == AccessPolicyTests.open)
        #expect(policy.ruleSet(of: AccessPolicyTests.locked)?.rules == [AccessRule(someoneElse)])
        #expect(policy.ruleSet(of: AccessPolicyTests.openX) == nil)
        #expect(policy.ruleSets.map(\.node) == [AccessPolicyTests.app, AccessPolicyTests.locked, AccessPolicyTests.open])
    }

    @Test func aRuleOnAnItemCoversThatItemOnly() {
        let policy = policy((AccessPolicyTests.token, [AccessRule(someoneElse)]))
        #expect(deniedAsUnadmitted(decide(policy, AccessPolicyTests.token, me, .read)))
        #expect(decide(policy, AccessPolicyTests.token2, me, .read) == .allow)
        #expect(decide(policy, AccessPolicyTests.app, me, .list) == .allow)
    }

    @Test func aWalkEndsWhereNoParentIsKnownAndACycleEnds() {
        let policy = policy((AccessPolicyTests.app, [AccessRule(someoneElse)]))
        #expect(policy.governing(AccessPolicyTests.deepToken) { _ in nil } == nil)
        #expect(policy.governing(NodeID(50)) { $0.rawValue == 50 ? NodeID(51) : NodeID(50) } == nil)
        struct Gone: Error {}
        #expect(throws: Gone.self) { try policy.governing(AccessPolicyTests.deepToken) { (_) throws(Gone) -> NodeID? in throw Gone() } }
    }

    @Test func readOnlyPrincipalsReadAndListButNeverWrite() {
        let rule = AccessRule(myExecutable, readOnly: true)
        let set = RuleSet(node: AccessPolicyTests.app, rules: [rule])
        let policy = AccessPolicy(ruleSets: [set])
        #expect(policy.decide(set, identity: me, access: .read) == .allow)
        #expect(policy.decide(set, identity: me, access: .list) == .allow)
        let decision = policy.decide(set, identity: me, access: .write)
        guard case .deny(let denial) = decision, case .readOnly(let pid, _, _) = denial else {
            Issue.record("expected a read-only denial, got \(decision)")
            return
        }
        #expect(pid == getpid())
        #expect(denial.description.contains("may only read"))
        // Another rule admitting the same process with writes wins over the read-only one.
        let both = RuleSet(node: AccessPolicyTests.app, rules: [rule, AccessRule(myExecutable)])
        #expect(AccessPolicy(ruleSets: [both]).decide(both, identity: me, access: .write) == .allow)
    }

    @Test func confirmationIsAskedOnlyWhenNoRuleAllowsOutright() {
        func decide(_ rules: [AccessRule], _ access: Access) -> AccessDecision {
            let set = RuleSet(node: AccessPolicyTests.app, rules: rules)
            return AccessPolicy(ruleSets: [set]).decide(set, identity: me, access: access)
        }
        let confirm = AccessRule(myExecutable, confirm: true)
        #expect(decide([confirm], .read) == .confirm(confirm))
        #expect(decide([confirm, AccessRule(myExecutable, readOnly: true)], .read) == .allow)
        #expect(decide([confirm, AccessRule(myExecutable, readOnly: true)], .write) == .confirm(confirm))
        guard case .deny(.readOnly) = decide([AccessRule(myExecutable, readOnly: true, confirm: true)], .write) else {
            Issue.record("a read-only rule asks nobody about a write")
            return
        }
    }

    @Test func aRuleSetWithoutRulesAdmitsNobodyAndARuleSetTwiceIsOneSet() {
        let policy = policy((AccessPolicyTests.other, []), (AccessPolicyTests.app, [AccessRule(someoneElse)]),
                            (AccessPolicyTests.app, [AccessRule(myExecutable)]))
        #expect(deniedAsUnadmitted(decide(policy, AccessPolicyTests.otherToken, me, .read)))
        #expect(decide(policy, AccessPolicyTests.token, me, .write) == .allow)
        #expect(policy.ruleSets.map(\.node) == [AccessPolicyTests.app, AccessPolicyTests.other])
        #expect(policy.ruleSet(of: AccessPolicyTests.app)?.rules == [AccessRule(someoneElse), AccessRule(myExecutable)])
    }

    @Test func aRuleAtTheRootGovernsTheWholeVault() {
        let policy = policy((.root, [AccessRule(someoneElse)]))
        #expect(governing(policy, AccessPolicyTests.deepToken)?.node == .root)
        #expect(deniedAsUnadmitted(decide(policy, .root, me, .list)))
    }

    @Test func aProcessThatIsGoneIsAdmittedByNoRule() throws {
        let child = try ChildProcess("/usr/bin/sleep", ["60"])
        let gone = ProcessIdentity(pid: child.pid)
        child.end()
        let set = RuleSet(node: AccessPolicyTests.app, rules: [AccessRule(try Principal.executable(at: "/usr/bin/sleep"))])
        let decision = AccessPolicy(ruleSets: [set]).decide(set, identity: gone, access: .read)
        #expect(decision == .deny(.noRuleAdmits(pid: child.pid, executable: nil, unit: nil)))
    }

    @Test func denialsNameTheProcessAndNeverThePath() {
        let set = RuleSet(node: AccessPolicyTests.app, rules: [AccessRule(someoneElse)])
        guard case .deny(let denial) = AccessPolicy(ruleSets: [set]).decide(set, identity: me, access: .read) else {
            Issue.record("expected a denial")
            return
        }
        #expect(denial.description.contains("process \(getpid())"))
        #expect(denial.description.contains(me.executable!.path))
        #expect(!denial.description.contains("#2") && !denial.description.contains("node"))
    }
}
