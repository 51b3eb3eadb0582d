import VaultStorageKit
import CSQLite
import Glibc
import SystemCalls
import SystemPackage

/// A value bound to or read from SQLite. Only ciphertext, tags and counters pass through here.
enum SQLValue: Equatable {
    case integer(Int64)
    case blob([UInt8])
    case null

    var integer: Int64? { if case .integer(let v) = self { return v } else { return nil } }
    var blob: [UInt8]? {
        switch self {
        case .blob(let b): return b
        default: return nil
        }
    }
}

/// One SQLite connection with cached prepared statements. Not thread-safe by itself: it is
/// only ever used inside the owning vault's mutex, which is what makes the Sendable claim true.
final class SQLiteConnection: @unchecked Sendable {
    private let handle: OpaquePointer
    private var statements: [String: OpaquePointer] = [:]
    let path: String

    init(path: String, create: Bool) throws(VaultError) {
        self.path = path
        var db: OpaquePointer?
        let flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_NOMUTEX | (create ? SQLITE_OPEN_CREATE : 0)
        let rc = sqlite3_open_v2(path, &db, flags, nil)
        guard rc == SQLITE_OK, let db else {
            let message = db.map { String(cString: sqlite3_errmsg($0)) } ?? "out of memory"
            sqlite3_close_v2(db)
            throw SQLiteConnection.error(rc, message, path: path)
        }
        handle = db
        sqlite3_extended_result_codes(db, 1)
        // Wait out other processes' writes from the very first statement on.
        sqlite3_busy_timeout(db, SQLiteConnection.busyTimeout)
        // Keep the -wal and -shm files when the last connection closes: recreating them needs
        // free space, and a vault must stay readable (and writable in place) on a full disk.
        var persist: Int32 = 1
        sqlite3_file_control(db, "main", SQLITE_FCNTL_PERSIST_WAL, &persist)
    }

    /// How long a statement waits out other processes' locks (milliseconds).
    static let busyTimeout: Int32 = 30_000

    deinit {
        for statement in statements.values { sqlite3_finalize(statement) }
        sqlite3_close_v2(handle)
    }

    /// Maps SQLite's result codes onto the vault's errors; the one place that does so.
    /// `systemErrno` is the OS error behind an I/O failure, when SQLite saw one.
    static func error(_ code: Int32, _ message: String, path: String, systemErrno: Errno? = nil) -> VaultError {
        if code & 0xFF == SQLITE_IOERR && (systemErrno == .noSpace || systemErrno == .diskQuotaExceeded) { return .diskFull }
        switch code & 0xFF {
        case SQLITE_FULL: return .diskFull
        case SQLITE_NOTADB: return .notAVault(path: path, reason: "not an SQLite database")
        case SQLITE_CORRUPT: return .integrityFailure("the vault's SQLite file (\(message))")
        case SQLITE_BUSY, SQLITE_LOCKED: return .vaultInUse(path)
        // Our own writes check for conflicts first; a violated constraint means an edited file.
        case SQLITE_CONSTRAINT: return .integrityFailure("the vault's SQLite file (\(message))")
        default: return .storageFailure("\(message) (SQLite code \(code))")
        }
    }

    private func fail(_ code: Int32) -> VaultError {
        SQLiteConnection.error(code, String(cString: sqlite3_errmsg(handle)), path: path,
                               systemErrno: Errno(rawValue: sqlite3_system_errno(handle)))
    }

    func execute(_ sql: String) throws(VaultError) {
        let rc = sqlite3_exec(handle, sql, nil, nil, nil)
        guard rc == SQLITE_OK else { throw fail(rc) }
    }

    private func prepared(_ sql: String) throws(VaultError) -> OpaquePointer {
        if let statement = statements[sql] { return statement }
        var statement: OpaquePointer?
        let rc = sqlite3_prepare_v3(handle, sql, -1, UInt32(SQLITE_PREPARE_PERSISTENT), &statement, nil)
        guard rc == SQLITE_OK, let statement else { throw fail(rc) }
        statements[sql] = statement
        return statement
    }

    /// Runs `sql` with `arguments`, handing each result row to `body`.
    func query(_ sql: String, _ arguments: [SQLValue] = [], _ body: ([SQLValue]) throws(VaultError) -> Void) throws(VaultError) {
        let statement = try prepared(sql)
        defer {
            sqlite3_reset(statement)
            sqlite3_clear_bindings(statement)
        }
        for (index, argument) in arguments.enumerated() {
            let position = Int32(index + 1)
            let rc: Int32
            switch argument {
            case .integer(let value):
                rc = sqlite3_bind_int64(statement, position, value)
            case .blob(let bytes):
                rc = bytes.withUnsafeBytes { sqlite3_bind_blob64(statement, position, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1), UInt64($0.count), csqlite_transient()) }
            case .null:
                rc = sqlite3_bind_null(statement, position)
            }
            guard rc == SQLITE_OK else { throw fail(rc) }
        }
        while true {
            let rc = sqlite3_step(statement)
            if rc == SQLITE_DONE { return }
            guard rc == SQLITE_ROW else { throw fail(rc) }
            var row: [SQLValue] = []
            for column in 0..<sqlite3_column_count(statement) {
                switch sqlite3_column_type(statement, column) {
                case SQLITE_INTEGER:
                    row.append(.integer(sqlite3_column_int64(statement, column)))
                case SQLITE_NULL:
                    row.append(.null)
                default:
                    let count = Int(sqlite3_column_bytes(statement, column))
                    if count == 0 {
                        row.append(.blob([]))
                    } else {
                        let pointer = sqlite3_column_blob(statement, column)!
                        row.append(.blob(Array(UnsafeRawBufferPointer(start: pointer, count: count))))
                    }
                }
            }
            try body(row)
        }
    }

    func rows(_ sql: String, _ arguments: [SQLValue] = []) throws(VaultError) -> [[SQLValue]] {
        var rows: [[SQLValue]] = []
        try query(sql, arguments) { rows.append($0) }
        return rows
    }

    func row(_ sql: String, _ arguments: [SQLValue] = []) throws(VaultError) -> [SQLValue]? {
        try rows(sql, arguments).first
    }

    /// Runs a statement that returns no rows; gives the number of rows changed.
    @discardableResult
    func run(_ sql: String, _ arguments: [SQLValue] = []) throws(VaultError) -> Int {
        try query(sql, arguments) { _ in }
        return Int(sqlite3_changes(handle))
    }

    func integer(_ sql: String) throws(VaultError) -> Int64 {
        guard let value = try row(sql)?.first?.integer else { throw .storageFailure("no result for \(sql)") }
        return value
    }

    /// Write transactions committed through this connection (SQLite's data_version counts
    /// only other connections' commits).
    private(set) var commits = 0

    /// One write transaction: BEGIN IMMEDIATE takes the write lock up front (waiting out other
    /// writers), and COMMIT is durable (WAL, synchronous=FULL). Any error rolls back.
    /// `durable: false` skips the fsync of this commit (synchronous=NORMAL): the change survives
    /// a crash of the process but not of the machine until the next durable commit, whose fsync
    /// of the WAL takes it along. For steps that a durable commit always follows.
    /// `counted: false` leaves `commits` alone (see `VaultStorage.write(_:seenByChangeToken:_:)`).
    func writeTransaction<R: ~Copyable>(durable: Bool = true, counted: Bool = true,
                                        _ body: () throws(VaultError) -> R) throws(VaultError) -> R {
        if !durable { try run("PRAGMA synchronous = NORMAL") }
        defer { if !durable { _ = try? run("PRAGMA synchronous = FULL") } }
        // Prepared once and cached like any statement: BEGIN and COMMIT run on every call.
        try run("BEGIN IMMEDIATE")
        do {
            let result = try body()
            try run("COMMIT")
            if counted { commits += 1 }
            return result
        } catch {
            _ = try? run("ROLLBACK")
            throw error
        }
    }

    /// Makes every commit so far durable, `durable: false` ones included: one sync of the WAL
    /// through SQLite's own handle of it (SQLITE_FCNTL_JOURNAL_POINTER), which is what a
    /// synchronous=FULL commit does after writing its frames, without writing a frame. An empty
    /// transaction would not do: SQLite commits nothing, and syncs nothing, when no page changed.
    /// A checkpoint would sync the WAL and then write and sync the database file as well.
    /// No WAL open yet (nothing written through this connection): nothing to sync.
    func syncWAL() throws(VaultError) {
        var journal: UnsafeMutablePointer<sqlite3_file>? = nil
        let rc = sqlite3_file_control(handle, "main", SQLITE_FCNTL_JOURNAL_POINTER, &journal)
        guard rc == SQLITE_OK else { throw fail(rc) }
        guard let journal, let methods = journal.pointee.pMethods, let sync = methods.pointee.xSync else { return }
        let synced = sync(journal, SQLITE_SYNC_NORMAL)
        guard synced == SQLITE_OK else {
            throw SQLiteConnection.error(synced, "cannot sync the write-ahead log", path: path, systemErrno: .last)
        }
    }

    /// Runs `body` failing at once (SQLITE_BUSY) on another process's lock instead of waiting:
    /// for work that may as well be done later.
    func withoutWaiting<R>(_ body: () throws(VaultError) -> R) throws(VaultError) -> R {
        sqlite3_busy_timeout(handle, 0)
        defer { sqlite3_busy_timeout(handle, SQLiteConnection.busyTimeout) }
        return try body()
    }

    /// A consistent snapshot for several reads.
    func readTransaction<R: ~Copyable>(_ body: () throws(VaultError) -> R) throws(VaultError) -> R {
        // Inside a transaction already (a write's): its snapshot is the one to read.
        guard sqlite3_get_autocommit(handle) != 0 else { return try body() }
        try run("BEGIN DEFERRED")
        let result: R
        do {
            result = try body()
        } catch {
            _ = try? run("ROLLBACK")
            throw error
        }
        do {
            try run("COMMIT")
        } catch {
            _ = try? run("ROLLBACK")
            throw error
        }
        return result
    }

    /// Changes whenever another connection commits.
    func dataVersion() throws(VaultError) -> Int64 {
        try integer("PRAGMA data_version")
    }
}
