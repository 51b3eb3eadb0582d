import ArgumentParser
import Daemon
import Glibc
import Support
import Synchronization
import VaultCore

struct LogCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "log",
        abstract: "Show the access log: one line per open, listing, denial, confirmation, rule or class change, lock and unlock.",
        discussion: """
            Lines: time (UTC), pid, executable, unit, access, decision, path. In a vault with members (the team \
            log) the member who signed the entry follows the time: a name, `NAME(removed)` for a member removed \
            since, or `-` for an entry written unsigned (while a mount was locked, or by a passphrase or an older \
            member key). A batch that fails authentication, its signature or its chain is reported and the \
            command fails.
            """
    )

    @OptionGroup var vault: VaultOptions
    @Option(help: "Only entries of the last DURATION (30s, 15m, 1h, 2d).") var since: String?
    @Flag(help: "Only denials (and refused confirmations).") var denied = false
    // Not --member, which every command has already: open the vault with your member key. The
    // spelling `log --member NAME` still works (`EntrySelection.resolvingMember`).
    @Option(name: .customLong("by"), help: ArgumentHelp("Only entries signed by this member (a team vault). `--member NAME` does the same when NAME is no path in the log.", valueName: "member"))
    var signedBy: String?
    @Option(help: "Only entries about this item (or dictionary) itself, not what is below it.") var item: String?
    @Flag(help: "Print a JSON array of entries (JSON lines with --follow).") var json = false
    @Flag(help: "Keep printing entries as they are committed, until interrupted.") var follow = false
    @Argument(help: "Only entries at or below this path.") var path: String?

    func validate() throws {
        if let since, LockTriggers.parseDuration(since) == nil {
            throw ValidationError("--since takes a duration such as 30s, 15m, 1h or 2d")
        }
    }

    /// Set by SIGINT and SIGTERM while following.
    private static let interrupted = Atomic<Bool>(false)

    func run() throws {
        try reportingErrors { () throws(VaultError) in
            var selection = EntrySelection(deniedOnly: denied, signedBy: signedBy,
                                           below: try path.map { (text) throws(VaultError) in try VaultPath(text) },
                                           exactly: try item.map { (text) throws(VaultError) in try VaultPath(text) })
            let opened = try vault.session()
            let start = since.flatMap(LockTriggers.parseDuration).map { Timestamp.now().seconds - Int64($0) }
            if follow { LogCommand.catchInterrupts() }
            var reading = try opened.accessLog(since: start, afterSequence: nil)
            if vault.asMember, let path { selection = selection.resolvingMember(path, in: reading) }
            var shown = reading.entries.filter(selection.keeps)
            if json && !follow {
                try JSONOutput.write(shown.map(AccessLogEntryJSON.init))
            } else {
                try print(shown, members: reading.hasMembers)
            }
            try checked(reading)
            guard follow else { return }
            // The file's change stamp says when to look again; through a daemon, every pause does.
            let direct = opened as? Vault
            var stamp = try direct?.changeStamp()
            var last = reading.lastSequence
            while !LogCommand.interrupted.load(ordering: .relaxed) {
                var pause = timespec(tv_sec: 0, tv_nsec: 200_000_000)
                nanosleep(&pause, nil)  // a signal ends it early
                if let direct {
                    let now = try direct.changeStamp()
                    guard now != stamp else { continue }
                    stamp = now
                }
                // The newest batches only: each batch is printed once, as it is committed.
                reading = try opened.accessLog(since: nil, afterSequence: last ?? 0)
                last = reading.lastSequence
                shown = reading.entries.filter(selection.keeps)
                try print(shown, members: reading.hasMembers)
                try checked(reading)
            }
        }
    }

    private func print(_ entries: [AccessLogEntry], members: Bool) throws(VaultError) {
        guard !entries.isEmpty else { return }
        if json {
            // One line each (JSON lines): a follower can act on each as it comes.
            for entry in entries { try JSONOutput.write(AccessLogEntryJSON(entry)) }
            return
        }
        var output = ""
        for entry in entries {
            var fields = [AccessLogEntryJSON.isoTime(entry.time), String(entry.pid), entry.executable ?? "-", entry.unit ?? "-",
                          entry.access.description, entry.decision.description, AccessLogEntryJSON.pathText(entry)]
            if members { fields.insert(entry.member.map { $0.name + ($0.isMember ? "" : "(removed)") } ?? "-", at: 1) }
            output += fields.map(Terminal.printable).joined(separator: "  ") + "\n"
        }
        Terminal.writeAll(1, output)
    }

    /// Every batch that did not open goes to stderr, and the command fails (after printing the rest).
    private func checked(_ reading: AccessLogReading) throws(VaultError) {
        guard !reading.problems.isEmpty else { return }
        for problem in reading.problems { Terminal.printError("integrity failure: \(problem)") }
        throw .integrityFailure("\(reading.problems.count) access log batch(es)")
    }


    private static func catchInterrupts() {
        // A parent may have started us with them blocked (the mask is inherited).
        var wanted = sigset_t()
        sigemptyset(&wanted)
        for signal in [SIGINT, SIGTERM] {
            sigaddset(&wanted, signal)
            var action = sigaction()
            action.__sigaction_handler.sa_handler = { _ in LogCommand.interrupted.store(true, ordering: .relaxed) }
            // No SA_RESTART: the pause ends at the signal.
            sigaction(signal, &action, nil)
        }
        pthread_sigmask(SIG_UNBLOCK, &wanted, nil)
    }
}

/// One entry of `log --json`.
struct AccessLogEntryJSON: Encodable {
    /// ISO-8601, UTC, with nanoseconds.
    let time: String
    let pid: Int32
    let executable: String?
    let unit: String?
    let access: String
    /// "allowed", "denied", "confirmed" or "refused".
    let decision: String
    let reason: String?
    /// nil for events of no path; `<node N>` for a node that no longer exists.
    let path: String?
    /// The member who signed the entry (a team vault); nil when unsigned.
    let member: String?
    /// Whether `member` is a member now (false: removed since); nil when unsigned.
    let isMember: Bool?
    /// The member a `member-add` or `member-remove` entry is about.
    let aboutMember: String?

    init(_ entry: AccessLogEntry) {
        time = AccessLogEntryJSON.isoTime(entry.time)
        pid = entry.pid
        executable = entry.executable
        unit = entry.unit
        access = entry.access.description
        switch entry.decision {
        case .allowed: decision = "allowed"; reason = nil
        case .denied(let why): decision = "denied"; reason = why
        case .confirmed(let yes): decision = yes ? "confirmed" : "refused"; reason = nil
        }
        path = entry.path == nil && entry.node == nil ? nil : AccessLogEntryJSON.pathText(entry)
        member = entry.member?.name
        isMember = entry.member?.isMember
        aboutMember = entry.aboutMember
    }

    static func pathText(_ entry: AccessLogEntry) -> String {
        if let about = entry.aboutMember { return "member " + about }
        if let path = entry.path { return path.isRoot ? "/" : path.description }
        if let node = entry.node { return "<node \(node.rawValue)>" }
        return "-"
    }

    static func isoTime(_ time: Timestamp) -> String {
        JSONOutput.utcTime(time, nanoseconds: true)
    }
}
