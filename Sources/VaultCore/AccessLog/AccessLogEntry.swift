/// One line of the access log: who did what to which path, when, and what was decided.
///
/// The path is a secret (it is made of names): it is held as a `VaultPath`, whose names live in
/// memory of their own, wiped with their last copy, and it reaches the vault file only inside a
/// sealed batch, encoded straight into locked memory (`AccessLogBatch`). The executable, unit and
/// reason name the process and the rule, never a path.
public struct AccessLogEntry: Sendable {
    public var time: Timestamp
    /// 0 for events no process caused (a lock by the idle timer).
    public var pid: Int32
    /// As `/proc/PID/exe` read; nil when it could not be read (or for pid 0).
    public var executable: String?
    /// The innermost systemd unit or scope; nil when none.
    public var unit: String?
    /// The node the entry is about, when it was recorded by node. Kept in the entry when its
    /// path could not be resolved as it was written (the vault was locked, or the node gone), so
    /// the reader, holding the keys, can resolve it then.
    public var node: NodeID?
    /// nil for events about no path (lock, unlock) or whose path was not resolved.
    public var path: VaultPath?
    public var access: LoggedAccess
    public var decision: LoggedDecision
    /// Who signed the batch this entry was read from (a team log); nil when unsigned. Never
    /// written into a batch by this field: the batch's signature says it.
    public var member: LoggedMember? = nil
    /// The member a membership change (`memberAddition`, `memberRemoval`) was about.
    public var aboutMember: String? = nil

    public init(time: Timestamp = .now(), pid: Int32, executable: String? = nil, unit: String? = nil, node: NodeID? = nil,
                path: VaultPath? = nil, access: LoggedAccess, decision: LoggedDecision, member: LoggedMember? = nil,
                aboutMember: String? = nil) {
        self.time = time
        self.pid = pid
        self.executable = executable
        self.unit = unit
        self.node = node
        self.path = path
        self.access = access
        self.decision = decision
        self.member = member
        self.aboutMember = aboutMember
    }
}
