import Glibc
import Locking
import Support
import Synchronization
import VaultCore

/// Decides, before a request is served, whether the vault's access rules let the process
/// behind it do what it asks. The rules are the vault's own records: loaded at mount, and
/// again within a second of any commit (`keychainfs allow` from another process), by a helper
/// thread that polls the vault's change stamp.
///
/// Fails closed: rules that fail authentication leave the gate refusing every request with
/// EIO until a reload reads sound rules again.
package final class AccessGate: Sendable {
    private let vault: Vault
    let broker: ConfirmationBroker
    /// The access log; nil when the mount keeps none (`--log-entries 0`).
    let log: AccessLogWriter?
    private let state: OrderedMutex<Rules>
    /// Processes lately found free of loader variables and changeable code.
    private let clearances = ProcessClearances()
    /// The rule set governing each node judged lately (nil: none), so that the reads and writes
    /// through a descriptor, each judged, need not walk the node's ancestors in the vault every
    /// time. Forgotten whenever a node may have moved or the rules changed: at every commit the
    /// refresher sees (the command line's included) and at every rename or removal through the
    /// mount. Each forgetting starts a new epoch, and a set found by a judgment that began in
    /// an earlier epoch is not kept: it may come from the rules or the tree before the change.
    private let governance = OrderedMutex<(epoch: UInt64, sets: [NodeID: RuleSet?])>(.accessGateGovernance, (0, [:]))

    private enum Rules {
        /// The policy, the stamp of the vault it was read at (nil: read before the stamp could
        /// be, so the next refresh reads again), and the rules' own stamp, which a locked
        /// mount can still read.
        case current(AccessPolicy, Vault.ChangeStamp?, Vault.RulesStamp?)
        case refused(VaultError)
    }

    /// What the rules say about a request.
    package enum Verdict: Sendable {
        case allowed
        case refused(VaultError)
        /// Allowed once the user confirms each of these (asked off the session loop's thread).
        case needsConfirmation([PendingAccess])
    }

    /// An access a `--confirm` rule lets a process ask for.
    package struct PendingAccess: Sendable {
        let node: NodeID
        let rule: AccessRule
        let access: Access
        let identity: ProcessIdentity
    }

    package init(vault: Vault, policy: AccessPolicy, broker: ConfirmationBroker, log: AccessLogWriter?) {
        self.vault = vault
        self.broker = broker
        self.log = log
        // No stamp: the first refresh reads the rules again, so a change committed between the
        // mount's read of the policy and now is not missed.
        state = OrderedMutex(.accessGateRules, .current(policy, nil, try? vault.rulesStamp()))
    }

    /// The verdict on every check of one request: refused if any is, else confirmations for
    /// those that need one.
    package func evaluate(_ checks: [AccessCheck], _ caller: RequestContext) -> Verdict {
        // Before the rules are read: see `governance`.
        let epoch = governance.withLock { $0.epoch }
        let policy: AccessPolicy
        switch state.withLock({ $0 }) {
        case .refused(let error): return .refused(error)
        case .current(let current, _, _): policy = current
        }
        // The usual case, a vault without rules, costs a log entry per open and nothing more.
        guard policy.hasAnyRules else {
            for check in checks where check.isAlwaysRecorded { record(check, node: check.nodeID, caller, .allowed) }
            return .allowed
        }
        var identity: ProcessIdentity? = nil
        var pending: [PendingAccess] = []
        var governed: [(AccessCheck, NodeID)] = []
        do throws(VaultError) {
            for check in checks {
                guard let node = try node(of: check.target) else {
                    // An entry not there yet (a create): its dictionary's check governs it.
                    if check.isAlwaysRecorded { record(check, node: nil, caller, .allowed) }
                    continue
                }
                guard let set = try governingRuleSet(of: node, in: policy, epoch: epoch) else {
                    if check.isAlwaysRecorded { record(check, node: node, caller, .allowed) }
                    continue
                }
                let who = identity ?? caller.identity()
                identity = who
                switch policy.decide(set, identity: who, access: check.access, channel: caller.channel, clearances: clearances) {
                case .allow:
                    governed.append((check, node))
                case .deny(let denial):
                    DaemonLog.accessDenied(denial)
                    record(check, node: node, caller, .denied(reason: denial.description))
                    return .refused(.accessDenied(denial))
                case .confirm(let rule):
                    pending.append(PendingAccess(node: node, rule: rule, access: check.access, identity: who))
                }
            }
        } catch {
            return .refused(error)
        }
        // Recorded once the whole request is allowed (or waits for a confirmation, which is
        // recorded with its answer).
        for (check, node) in governed { record(check, node: node, caller, .allowed) }
        return pending.isEmpty ? .allowed : .needsConfirmation(pending)
    }

    private func governingRuleSet(of node: NodeID, in policy: AccessPolicy, epoch: UInt64) throws(VaultError) -> RuleSet? {
        if let known = governance.withLock({ $0.epoch == epoch ? $0.sets[node] : nil }) { return known }
        let set = try vault.governingRuleSet(of: node, in: policy)
        governance.withLock { known in
            guard known.epoch == epoch else { return }
            if known.sets.count >= 4096 { known.sets.removeAll() }
            known.sets[node] = .some(set)
        }
        return set
    }

    /// A node moved or went, or the rules changed: what governs a node may differ. Called once
    /// the change is made.
    package func namespaceChanged() {
        governance.withLock { known in
            known.epoch += 1
            known.sets.removeAll()
        }
    }

    private func record(_ check: AccessCheck, node: NodeID?, _ caller: RequestContext, _ decision: LoggedDecision) {
        // A descriptor's reads and writes are judged each time, and logged only when refused.
        if check.isDescriptorUse, case .allowed = decision { return }
        // An entry by its dictionary and name: it may be about to go, or not be there yet,
        // and its path is resolved when the batch is flushed.
        if case .entry(let parent, let name) = check.target {
            log?.record(pid: caller.pid, access: LoggedAccess(check.access), decision: decision, node: parent, name: name)
            return
        }
        log?.record(pid: caller.pid, access: LoggedAccess(check.access), decision: decision, node: node)
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

    /// Asks the user about each pending access, in turn, without blocking: `completion` gets the
    /// first refusal or nil, on this thread when every answer is known at once, else on the
    /// thread of the dialog that answered last. A request waiting for a dialog so holds no
    /// thread (see `ConfirmationBroker`).
    func confirm(_ pending: ArraySlice<PendingAccess>, then completion: @escaping @Sendable (AccessDenial?) -> Void) {
        guard let access = pending.first else { return completion(nil) }
        let path: VaultPath
        do throws(VaultError) {
            path = try vault.path(of: access.node)
        } catch {
            return completion(.confirmationUnavailable("the path could not be read (\(error))"))
        }
        broker.answer(path: path, identity: access.identity, access: access.access, rule: access.rule) { [self] answer in
            DaemonLog.confirmationAnswered(answer, pid: access.identity.pid)
            log?.record(pid: access.identity.pid, access: .confirmation, decision: .confirmed(answer.allows), node: access.node)
            if case .deny(let denial) = answer.decision { return completion(denial) }
            confirm(pending.dropFirst(), then: completion)
        }
    }

    /// Reads the rules again if anything was committed since they were read. Called by the
    /// refresher thread, and at unlock.
    package func refresh() {
        guard !vault.isLocked else { return refreshWhileLocked() }
        let known: Vault.ChangeStamp? = state.withLock { rules in
            if case .current(_, let stamp, _) = rules { return stamp }
            return nil
        }
        let stamp: Vault.ChangeStamp
        do throws(VaultError) {
            stamp = try vault.changeStamp()
        } catch {
            return  // locked meanwhile: the unlock refreshes
        }
        guard stamp != known else { return }
        namespaceChanged()
        do throws(VaultError) {
            // The rules' stamp first: a change between the two reads shows as a difference later.
            let rulesStamp = try? vault.rulesStamp()
            let policy = try vault.accessPolicy()
            state.withLock { $0 = .current(policy, stamp, rulesStamp) }
            namespaceChanged()
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

    /// While locked the rules cannot be read (their key is gone), but the after-first-unlock
    /// items are still served: if the rules changed (`keychainfs allow` or `disallow` from the
    /// command line), every request is refused until an unlock reads them, never served under
    /// rules that are no longer the owner's.
    private func refreshWhileLocked() {
        guard let now = try? vault.rulesStamp() else { return }
        state.withLock { rules in
            if case .current(_, _, let known) = rules, known != now { rules = .refused(.locked) }
        }
    }

    /// Refreshes every quarter second, so a rule changed by the command line applies to the
    /// running mount within a second.
    package func startRefreshing() {
        HelperThread.start { [self] in
            while true {
                usleep(250_000)
                refresh()
                StackWipe.here()  // a refresh decrypts the ruled paths on this thread
            }
        }
    }

    /// Before a lock takes the keys: what the log holds is committed with its paths (a batch
    /// committed while locked keeps node ids, which `keychainfs log` resolves).
    package func willLock() {
        log?.flushReportingFailure()
    }

    /// A lock forgets every remembered answer (whoever unlocks is asked again), and is itself
    /// recorded and committed at once.
    package func didLock() {
        broker.forgetAll()
        log?.record(AccessLogEntry(pid: 0, access: .lock, decision: .allowed))
        log?.flushReportingFailure()
    }

    package func didUnlock() {
        log?.record(AccessLogEntry(pid: 0, access: .unlock, decision: .allowed))
    }
}
