import Glibc
import VaultCore

/// One thing a request needs the access rules to allow before it is served: an access to a
/// node, or to the entry `name` of a dictionary (what unlink, rmdir and rename act on: the
/// entry's own rules govern it when it has some, else its dictionary's).
package struct AccessCheck: Sendable {
    package enum Target: Sendable {
        case node(NodeID)
        case entry(parent: NodeID, name: ItemName)
    }

    let access: Access
    let target: Target
    /// An open or a creation of an item, a removal or a rename of an entry: recorded in the
    /// access log whether or not a rule governs it (in a team vault, the team log is who read
    /// and who changed what). Other checks are recorded when a rule governs them or they are
    /// refused.
    package var isAlwaysRecorded = false
    /// A read or write through an open descriptor: logged only when refused, or every read of
    /// an admitted program would fill the log.
    var isDescriptorUse = false

    package init(access: Access, target: Target, isAlwaysRecorded: Bool = false, isDescriptorUse: Bool = false) {
        self.access = access
        self.target = target
        self.isAlwaysRecorded = isAlwaysRecorded
        self.isDescriptorUse = isDescriptorUse
    }

    /// The node, when the check names one (not an entry to be looked up).
    var nodeID: NodeID? {
        if case .node(let id) = target { return id }
        return nil
    }

    package static func read(_ inode: UInt64) -> AccessCheck { AccessCheck(access: .read, target: .node(NodeID(Int64(inode)))) }
    package static func list(_ inode: UInt64) -> AccessCheck { AccessCheck(access: .list, target: .node(NodeID(Int64(inode)))) }
    package static func write(_ inode: UInt64) -> AccessCheck { AccessCheck(access: .write, target: .node(NodeID(Int64(inode)))) }
    package static func write(_ parent: UInt64, _ name: ItemName) -> AccessCheck {
        AccessCheck(access: .write, target: .entry(parent: NodeID(Int64(parent)), name: name))
    }
    /// The entry `name` of `parent` made, removed or renamed: a change, always recorded.
    package static func change(_ parent: UInt64, _ name: ItemName) -> AccessCheck {
        AccessCheck(access: .write, target: .entry(parent: NodeID(Int64(parent)), name: name), isAlwaysRecorded: true)
    }

    /// A read or write through a descriptor of the item `inode`.
    package static func use(_ inode: UInt64, _ access: Access) -> AccessCheck {
        var check = AccessCheck(access: access, target: .node(NodeID(Int64(inode))))
        check.isDescriptorUse = true
        return check
    }

    /// What an open with `flags` does: reading unless it may write or truncates.
    package static func open(_ inode: UInt64, flags: Int32) -> AccessCheck {
        var check: AccessCheck = flags & O_ACCMODE == O_RDONLY && flags & O_TRUNC == 0 ? .read(inode) : .write(inode)
        check.isAlwaysRecorded = true
        return check
    }
}
