import SystemCalls
import VaultStorageKit
import Glibc

/// Hears what other sessions commit to a vault in PostgreSQL (LISTEN on the vault's channel),
/// on a connection of its own, so waiting never holds the vault's mutex or its connection.
/// Made by `Vault.changeListener()`; driven by one thread, which calls `next(timeout:)` in a
/// loop. It holds no key and reads no record: only node ids pass through it.
///
/// Its connection may drop (a restarted server, a terminated backend, the network): it says so
/// once, connects again by itself, first after `retryDelays.lowerBound` seconds and then twice
/// as long each time up to `retryDelays.upperBound`, and once back says `.restored`, because
/// whatever was committed meanwhile was announced to nobody.
public final class VaultChangeListener: @unchecked Sendable {  // one thread drives it
    /// What `next(timeout:)` heard.
    public enum Notice: Equatable, Sendable {
        /// Committed by another session (another process or machine).
        case changed(VaultChange)
        /// The connection is gone or cannot be made; it is tried again with backoff.
        case lost(reason: String)
        /// Connected again after `lost`: treat everything as changed.
        case restored
    }

    public static let retryDelays = 0.1...5.0

    private let location: PostgresLocation
    /// The origin of this process's own writes to the vault (`PostgresChangeNotice`).
    private let ownOrigin: String
    /// Raised for every notice but of this process's own writes: the storage forgets its known rows.
    private let signal: OthersCommitSignal
    private var connection: PostgresConnection?
    /// A loss was reported and no `restored` yet.
    private var lost = false
    private var retryDelay = VaultChangeListener.retryDelays.lowerBound
    private var retryAt: Double = 0

    init(location: PostgresLocation, ownOrigin: String, signal: OthersCommitSignal) {
        self.location = location
        self.ownOrigin = ownOrigin
        self.signal = signal
    }

    /// Waits up to `timeout` seconds; nil when nothing was heard. Notices arriving together
    /// come as one change. Connects on the first call.
    public func next(timeout: Double) -> Notice? {
        guard let connection else { return reconnect(within: timeout) }
        let notices: [PostgresConnection.Notice]
        do throws(VaultError) {
            notices = try connection.awaitNotices(timeout: timeout)
        } catch {
            self.connection = nil
            retryDelay = VaultChangeListener.retryDelays.lowerBound
            retryAt = SystemCall.monotonicSeconds() + retryDelay
            lost = true
            signal.raise()
            return .lost(reason: VaultChangeListener.reason(error))
        }
        var change: VaultChange? = nil
        for notice in notices {
            guard let heard = PostgresChangeNotice.change(in: notice.payload, ownOrigin: ownOrigin) else { continue }
            change = change.map { $0.merged(with: heard) } ?? heard
        }
        if change != nil { signal.raise() }
        return change.map(Notice.changed)
    }

    /// Connects when the backoff allows, else waits out the rest of `timeout` for it.
    private func reconnect(within timeout: Double) -> Notice? {
        let wait = retryAt - SystemCall.monotonicSeconds()
        if wait > 0 {
            // Nothing to poll until the next attempt: a plain wait, bounded by the caller's timeout.
            _ = poll(nil, 0, Int32(min(wait, max(timeout, 0)) * 1000))
            return nil
        }
        do throws(VaultError) {
            let made = try PostgresConnection(location: location)
            try made.listen(location.channel)
            connection = made
        } catch {
            retryAt = SystemCall.monotonicSeconds() + retryDelay
            retryDelay = min(retryDelay * 2, VaultChangeListener.retryDelays.upperBound)
            guard lost else {
                lost = true
                return .lost(reason: VaultChangeListener.reason(error))
            }
            return nil
        }
        retryDelay = VaultChangeListener.retryDelays.lowerBound
        guard lost else { return nil }
        lost = false
        signal.raise()
        return .restored
    }

    /// The storage's message: it names the server (without a password) and libpq's reason,
    /// on one line (libpq's own spans several).
    private static func reason(_ error: VaultError) -> String {
        var message = "\(error)"  // VaultCore's description
        switch error {
        case .storageFailure(let storage), .storageUnreachable(let storage): message = storage
        default: break
        }
        return message.split(whereSeparator: \.isWhitespace).joined(separator: " ")
    }
}
