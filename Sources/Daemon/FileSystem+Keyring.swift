import Dispatch
import FUSEDriver
import Keyring
import VaultCore

/// A mount's lock is the Secret Service's lock when one process serves both.
extension FileSystem: LockControl {}

/// The kernel may make a notice wait for a request the mount is still answering (one that
/// waits for a confirmation, say): notices go out in order from a queue of their own, and the
/// bus's loop waits for one at most `noticeWait`. So the call's reply normally comes after the
/// kernel dropped what it cached (a client that removes an item and looks through the mount
/// at once sees it gone), and a notice held up never holds the bus for long.
private let notices = DispatchQueue(label: "keychainfs.mount-cache-notices")
private let noticeWait: DispatchTimeInterval = .seconds(1)

extension FileSystem: MountCache {
    package func dropEntry(_ name: ItemName, in parent: NodeID) {
        sendNotice { [self] in invalidateKernelCaches(entries: [(UInt64(parent.rawValue), name)], inodes: []) }
    }

    package func dropNode(_ node: NodeID) {
        sendNotice { [self] in invalidateKernelCaches(entries: [], inodes: [UInt64(node.rawValue)]) }
    }

    private func sendNotice(_ notice: @escaping @Sendable () -> Void) {
        let sent = DispatchSemaphore(value: 0)
        notices.async {
            notice()
            sent.signal()
        }
        _ = sent.wait(timeout: .now() + noticeWait)
    }
}
