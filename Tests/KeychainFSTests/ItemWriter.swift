import Foundation
import Glibc
import Synchronization

/// Writes items through a mount one by one on a thread of its own, and keeps which ones the
/// filesystem acknowledged: created, written whole and closed with 0.
final class ItemWriter: Sendable {
    private struct State {
        var running = true
        var acknowledged: [String: String] = [:]
        var failures: [Int32] = []
    }

    private let state = Mutex(State())
    private let finished = Mutex(false)

    init(into directory: String) {
        let thread = Thread { [self] in
            var index = 0
            while state.withLock({ $0.running }) {
                index += 1
                let name = "item-\(index)"
                let content = "content of item \(index)"
                let failure = ItemWriter.writeItem(directory + "/" + name, content)
                state.withLock { state in
                    if let failure { state.failures.append(failure) } else { state.acknowledged[name] = content }
                }
            }
            finished.withLock { $0 = true }
        }
        thread.start()
    }

    var acknowledged: [String: String] { state.withLock { $0.acknowledged } }
    var failures: [Int32] { state.withLock { $0.failures } }

    /// Stops after the item being written; false if it did not end in time.
    func stop() -> Bool {
        state.withLock { $0.running = false }
        return eventually(within: 30) { finished.withLock { $0 } }
    }

    /// nil when the item was created, written whole and closed with 0; else the failing errno.
    static func writeItem(_ path: String, _ content: String) -> Int32? {
        let fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0o600)
        guard fd >= 0 else { return errno }
        let bytes = Array(content.utf8)
        let written = write(fd, bytes, bytes.count)
        let writeError = errno
        guard close(fd) == 0 else { return errno }
        return written == bytes.count ? nil : writeError
    }
}
