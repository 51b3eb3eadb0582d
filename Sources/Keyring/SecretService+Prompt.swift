import DBus
import Support
import VaultCore

/// org.freedesktop.Secret.Prompt: its declaration (from which dispatch, the signature check
/// and introspection come), and the one prompt this service makes, for Unlock. Completing it
/// runs the unlock command (`--extpass`) on a helper thread and unlocks with its output,
/// the same unlock as `keychainfs unlock`; the bus keeps serving meanwhile. One command runs
/// at a time: prompts completed while it runs wait for its outcome (one dialog, not many).
extension SecretService {
    typealias PromptObject = (service: SecretService, id: UInt64)

    /// Only the client a prompt was made for may run or dismiss it.
    static let promptObject = BusObjectDeclaration<PromptObject>(called: "a prompt", interfaces: [
        BusInterface(promptInterface, methods: [
            BusMethod("Prompt", in: [("window-id", "s")]) { (object, call) throws(BusError) in
                try object.service.begin(prompt: object.id, call)
            },
            BusMethod("Dismiss") { (object, call) throws(BusError) in
                call.reply { _ in }
                object.service.dismiss(prompt: object.id)
            },
        ], signals: [
            BusSignal("Completed", [("dismissed", "b"), ("result", "v")]),
        ]),
    ], admit: { (object, call) throws(BusError) in
        guard object.service.prompts[object.id]?.owner == call.sender else { throw .accessDenied("this prompt belongs to another client") }
    })

    private func begin(prompt id: UInt64, _ call: BusCall) throws(BusError) {
        guard prompts[id]?.state == .waiting else { throw .failed("this prompt is already running") }
        call.reply { _ in }
        run(prompt: id)
    }

    private func run(prompt id: UInt64) {
        guard let command = unlockCommand else {
            // Nothing can ask for the passphrase: say so, as a dismissal.
            DaemonLog.unlockPromptWithoutCommand()
            return complete(prompt: id, dismissed: true)
        }
        if !locking.isLocked { return complete(prompt: id, dismissed: false) }
        prompts[id]?.state = .running
        promptsWaitingForUnlock.withLock { _ = $0.insert(id) }
        guard !unlockRunning else { return }
        unlockRunning = true
        let started = HelperThread.start { [self] in
            var unlocked = false
            do throws(VaultError) {
                let passphrase = try SecretInput.passphrase(file: nil, command: command, prompt: "", confirm: false)
                // Every prompt dismissed meanwhile: the answer is thrown away (the buffer is wiped).
                if !promptsWaitingForUnlock.withLock({ $0.isEmpty }) {
                    try locking.unlock(passphrase: passphrase)
                    unlocked = true
                }
            } catch {
                DaemonLog.unlockPromptFailed(error)
            }
            let succeeded = unlocked
            bus.post { [self] in finishUnlock(succeeded: succeeded) }
        }
        if !started { finishUnlock(succeeded: false) }
    }

    /// Every prompt waiting for the command completes with its outcome.
    private func finishUnlock(succeeded: Bool) {
        unlockRunning = false
        promptsWaitingForUnlock.withLock { $0.removeAll() }
        for id in prompts.ids(in: .running) { complete(prompt: id, dismissed: !succeeded) }
        for id in prompts.ids(in: .dismissed) { prompts[id] = nil }
        if succeeded { noticeLockChange() }
    }

    private func dismiss(prompt id: UInt64) {
        if prompts[id]?.state == .running {
            // The command keeps running for the others; this one's answer is not awaited.
            prompts[id]?.state = .dismissed
            promptsWaitingForUnlock.withLock { _ = $0.remove(id) }
            emitCompleted(id, dismissed: true, objects: [])
        } else {
            complete(prompt: id, dismissed: true)
        }
    }

    /// Completed(dismissed, result): the unlocked objects when it was not dismissed.
    private func complete(prompt id: UInt64, dismissed: Bool) {
        guard let prompt = prompts[id] else { return }
        prompts[id] = nil
        emitCompleted(id, dismissed: dismissed, objects: dismissed ? [] : prompt.objects)
    }

    private func emitCompleted(_ id: UInt64, dismissed: Bool, objects: [String]) {
        try? SecretService.promptObject.emit("Completed", from: SecretObject.prompt(id).path, on: bus) {
            (writer) throws(BusError) in
            try writer.bool(dismissed)
            try writer.open("v", "ao")
            try writer.open("a", "o")
            for object in objects { try writer.objectPath(object) }
            try writer.close()
            try writer.close()
        }
    }
}
