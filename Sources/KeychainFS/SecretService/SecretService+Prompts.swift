import VaultCore

/// org.freedesktop.Secret.Prompt: the one prompt this service makes, for Unlock. Completing
/// it runs the unlock command (`--extpass`) on a helper thread and unlocks with its output,
/// the same unlock as `keychainfs unlock`; the bus keeps serving meanwhile.
extension SecretService {
    func promptCall(_ call: BusCall, _ id: UInt64) throws(BusError) {
        guard let prompt = prompts[id] else { throw .noSuchObject(call.path) }
        guard prompt.owner == call.sender else { throw .accessDenied("this prompt belongs to another client") }
        switch call.member {
        case "Prompt":
            try expectSignature(call, "s")
            guard prompt.state == .waiting else { throw .failed("this prompt is already running") }
            call.reply { _ in }
            run(prompt: id)
        case "Dismiss":
            try expectSignature(call, "")
            call.reply { _ in }
            dismiss(prompt: id)
        default:
            throw .unknownMethod("no method \(call.member) on a prompt")
        }
    }

    /// Unlocks with the command's output, off the loop thread.
    private func run(prompt id: UInt64) {
        guard let command = unlockCommand else {
            // Nothing can ask for the passphrase: say so, as a dismissal.
            DaemonLog.unlockPromptWithoutCommand()
            return complete(prompt: id, dismissed: true)
        }
        if !locking.isLocked { return complete(prompt: id, dismissed: false) }
        prompts[id]?.state = .running
        let started = HelperThread.start { [self] in
            var unlocked = false
            do throws(VaultError) {
                let passphrase = try SecretInput.passphrase(file: nil, command: command, prompt: "", confirm: false)
                // Dismissed meanwhile: the answer is thrown away (the buffer is wiped).
                let dismissed = abandonedPrompts.withLock { $0.contains(id) }
                if !dismissed {
                    try locking.unlock(passphrase: passphrase)
                    unlocked = true
                }
            } catch {
                DaemonLog.unlockPromptFailed(error)
            }
            let succeeded = unlocked
            bus.post { [self] in
                abandonedPrompts.withLock { _ = $0.remove(id) }
                let dismissed = prompts[id]?.state != .running
                if dismissed { prompts[id] = nil } else { complete(prompt: id, dismissed: !succeeded) }
                if succeeded { noticeLockChange() }
            }
        }
        if !started { complete(prompt: id, dismissed: true) }
    }

    private func dismiss(prompt id: UInt64) {
        if prompts[id]?.state == .running {
            // The command keeps running; its answer is thrown away when it comes.
            prompts[id]?.state = .dismissed
            abandonedPrompts.withLock { _ = $0.insert(id) }
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
        try? bus.emitSignal(path: SecretObject.prompt(id).path, interface: SecretService.promptInterface, member: "Completed") {
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
