import Glibc
import Synchronization
import VaultCore

/// Decides, before a request is served, whether the vault's access rules let the process
/// behind it do what it asks. The rules are the vault's own records: loaded at mount, and
/// again within a second of any commit (`keychainfs allow` from another process), by a helper
/// thread that polls the vault's change stamp.
///
/// Fails closed: rules that fail authentication leave the gate refusing every request with
/// EIO until a reload reads sound rules again.
final class AccessGate: Sendable {
    private let vault: Vault
    let broker: ConfirmationBroker
    private let state: Mutex<Rules>

    private enum Rules {
        /// The policy, and the stamp of the vault it was read at (nil: read before the stamp
        /// could be, so the next refresh reads again).
        case current(AccessPolicy, Vault.ChangeStamp?)
        case refused(VaultError)
    }

    /// What the rules say about a request.
    enum Verdict: Sendable {
        case allowed
        case refused(VaultError)
        /// Allowed once the user confirms each of these (asked off the session loop's thread).
        case needsConfirmation([PendingAccess])
    }

    /// An access a `--confirm` rule lets a process ask for.
    struct PendingAccess: Sendable {
        let node: NodeID
        let rule: AccessRule
        let access: Access
        let identity: ProcessIdentity
    }

    init(vault: Vault, policy: AccessPolicy, broker: ConfirmationBroker) {
        self.vault = vault
        self.broker = broker
        state = Mutex(.current(policy, try? vault.changeStamp()))
    }

    /// The verdict on every check of one request: refused if any is, else confirmations for
    /// those that need one.
    func evaluate(_ checks: [AccessCheck], _ caller: RequestContext) -> Verdict {
        let policy: AccessPolicy
        switch state.withLock({ $0 }) {
        case .refused(let error): return .refused(error)
        case .current(let current, _): policy = current
        }
        // The usual case, a vault without rules, costs nothing more.
        guard policy.hasAnyRules else { return .allowed }
        var identity: ProcessIdentity? = nil
        var pending: [PendingAccess] = []
        do throws(VaultError) {
            for check in checks {
                guard let node = try node(of: check.target) else { continue }
                guard let set = try vault.governingRuleSet(of: node, in: policy) else { continue }
                let who = identity ?? caller.identity()
                identity = who
                switch policy.decide(set, identity: who, access: check.access) {
                case .allow: continue
                case .deny(let denial):
                    DaemonLog.accessDenied(denial)
                    return .refused(.accessDenied(denial))
                case .confirm(let rule):
                    pending.append(PendingAccess(node: node, rule: rule, access: check.access, identity: who))
                }
            }
        } catch {
            return .refused(error)
        }
        return pending.isEmpty ? .allowed : .needsConfirmation(pending)
    }

    /// The node a check is about; nil for an entry that does not exist (the request fails
    /// on its own, or creates it under its dictionary, which another check covers).
    private func node(of target: AccessCheck.Target) throws(VaultError) -> NodeID? {
        switch target {
        case .node(let id):
            return id
        case .entry(let parent, let name):
            do throws(VaultError) {
                return try vault.lookup(name, in: parent).id
            } catch .notFound {
                return nil
            }
        }
    }

    /// Asks the user about each pending access, in turn; blocks for as long as the
    /// confirmation command takes. The denial of the first one refused, or nil when all are
    /// allowed.
    func confirm(_ pending: [PendingAccess]) -> AccessDenial? {
        for access in pending {
            let path: VaultPath
            do throws(VaultError) {
                path = try vault.path(of: access.node)
            } catch {
                return .confirmationUnavailable("the path could not be read (\(error))")
            }
            let answer = broker.answer(path: path, identity: access.identity, access: access.access, rule: access.rule)
            DaemonLog.confirmationAnswered(answer, pid: access.identity.pid)
            if case .deny(let denial) = answer.decision { return denial }
        }
        return nil
    }

    /// Reads the rules again if anything was committed since they were read. Called by the
    /// refresher thread, and at unlock.
    func refresh() {
        guard !vault.isLocked else { return }
        let known: Vault.ChangeStamp? = state.withLock { rules in
            if case .current(_, let stamp) = rules { return stamp }
            return nil
        }
        let stamp: Vault.ChangeStamp
        do throws(VaultError) {
            stamp = try vault.changeStamp()
        } catch {
            return  // locked meanwhile: the unlock refreshes
        }
        guard stamp != known else { return }
        do throws(VaultError) {
            let policy = try vault.accessPolicy()
            state.withLock { $0 = .current(policy, stamp) }
        } catch .locked {
            return
        } catch {
            let wasRefusing = state.withLock { rules in
                defer { rules = .refused(error) }
                if case .refused = rules { return true }
                return false
            }
            if !wasRefusing { DaemonLog.accessRulesRefused(error) }
        }
    }

    /// Refreshes every quarter second, so a rule changed by the command line applies to the
    /// running mount within a second.
    func startRefreshing() {
        HelperThread.start { [self] in
            while true {
                usleep(250_000)
                refresh()
            }
        }
    }

    /// A lock forgets every remembered answer: whoever unlocks is asked again.
    func didLock() {
        broker.forgetAll()
    }
}
