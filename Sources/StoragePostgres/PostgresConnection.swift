import VaultStorageKit
import CPostgres
import Glibc
import SystemCalls

/// A value bound to or read from PostgreSQL. Only ciphertext, tags, counters and the vault's
/// name pass through here.
enum PGValue {
    case integer(Int64)
    case bytes([UInt8])
    case text(String)
    case null

    var integer: Int64? { if case .integer(let v) = self { return v } else { return nil } }
    var bytes: [UInt8]? { if case .bytes(let b) = self { return b } else { return nil } }
}

/// One libpq connection with its prepared statements. Every parameter and result travels in
/// binary, so ciphertext is never escaped into SQL text. Not thread-safe by itself: it is only
/// used inside the owning vault's mutex, which is what makes the Sendable claim true.
///
/// Every exchange with the server is bounded in time: the connection is made with a
/// `connect_timeout` and TCP keepalives (unless the URI sets its own), and each statement is
/// sent without blocking and waited for on the socket up to `location.queryTimeout`. A server
/// that stops answering, closes the connection or is gone fails the call with
/// `.storageUnreachable` and drops the connection; the next call outside a transaction
/// connects again (statements are prepared again on first use, channels listened to again).
final class PostgresConnection: @unchecked Sendable {
    /// nil once the connection was lost, until a call connects again.
    private var handle: OpaquePointer?
    private let location: PostgresLocation
    /// Statement names by SQL text; prepared once per connection.
    private var statements: [String: String] = [:]
    /// Names statements take, never one twice on a connection: a batch that failed forgets what
    /// it prepared, which the server may or may not have kept.
    private var statementNumber = 0
    /// Statements whose results nothing waits for, held until one that is waited for (or
    /// `flush`) sends them all ahead of it in one round trip (libpq's pipeline mode).
    private var deferred: [Statement] = []
    /// What `listen` was asked for, listened to again on every new connection.
    private var channels: [String] = []
    /// Why the connection was lost, while it is; what calls fail with until it is back.
    private var lost: String?
    /// A failed attempt to connect again is not repeated before this (CLOCK_MONOTONIC
    /// seconds): calls queued on the vault's mutex during an outage fail at once instead of
    /// each waiting out a connect timeout.
    private var retryAfter: Double = 0
    /// Set by the owner while one of its transactions is open. A connection lost inside one is
    /// not replaced until it ends: the statements after the loss would run outside it, each
    /// committed on its own.
    var inTransaction = false
    /// Told when the connection is lost and when it is back; called inside the vault's mutex.
    var observer: (@Sendable (StorageConnectionEvent) -> Void)?
    /// How many connections were made; a change tells the owner NOTIFYs may have been missed.
    private(set) var generation = 0
    /// What the user named the server by, for messages (the password, if any, removed).
    var displayName: String { location.displayName }

    /// Defaults given before the URI, so that a URI (or PGCONNECT_TIMEOUT) setting one wins.
    static let connectTimeoutSeconds = 5
    private static let retryInterval = 1.0

    /// Connects to `location`'s server (the URI without the vault-name fragment).
    init(location: PostgresLocation) throws(VaultError) {
        self.location = location
        try connect()
    }

    deinit { if let handle { PQfinish(handle) } }

    private static func text(_ pointer: UnsafePointer<CChar>?) -> String {
        guard let pointer else { return "" }
        var message = String(cString: pointer)
        while message.last == "\n" || message.last == " " { message.removeLast() }
        // One line: libpq's messages may span several (one per address tried).
        return message.split(separator: "\n").map { $0.trimmingPrefix(while: { $0 == " " || $0 == "\t" }) }.joined(separator: "; ")
    }

    // MARK: connecting

    private func connect() throws(VaultError) {
        var keywords = ["keepalives", "keepalives_idle", "keepalives_interval", "keepalives_count"]
        var values = ["1", "30", "10", "3"]
        if getenv("PGCONNECT_TIMEOUT") == nil {
            keywords.append("connect_timeout")
            values.append(String(PostgresConnection.connectTimeoutSeconds))
        }
        // Expanded in place: what the URI sets overrides the entries above.
        keywords.append("dbname")
        values.append(location.uri)
        let connection = PostgresConnection.withCStrings(keywords) { keywords in
            PostgresConnection.withCStrings(values) { values in PQconnectdbParams(keywords, values, 1) }
        }
        guard let connection else { throw unreachable("cannot connect to PostgreSQL at \(displayName): out of memory") }
        guard PQstatus(connection) == CONNECTION_OK, PQsetnonblocking(connection, 1) == 0 else {
            let message = PostgresConnection.text(PQerrorMessage(connection))
            PQfinish(connection)
            retryAfter = SystemCall.monotonicSeconds() + PostgresConnection.retryInterval
            throw unreachable("cannot connect to PostgreSQL at \(displayName): \(message)")
        }
        // libpq prints notices (and a server's last words to an idle session) on stderr; a
        // library has no business there, and what matters arrives as a result or a loss.
        PQsetNoticeProcessor(connection, { _, _ in }, nil)
        handle = connection
        statements = [:]
        deferred = []
        generation += 1
        do {
            // Durability is the commit's: a server, database or role that turned it off is
            // overruled for this session (`.carriedByNextDurableCommit` turns it off per
            // transaction). Stronger settings (remote_write, remote_apply) are the cluster's.
            try execute("SELECT set_config('synchronous_commit', 'on', false) WHERE current_setting('synchronous_commit') IN ('off', 'local')")
            for channel in channels { try execute("LISTEN \(try quoted(channel))") }
        } catch {
            // Half set up is not connected: the next attempt starts over.
            if let handle { PQfinish(handle) }
            handle = nil
            statements = [:]
            deferred = []
            retryAfter = SystemCall.monotonicSeconds() + PostgresConnection.retryInterval
            throw error
        }
        if lost != nil {
            lost = nil
            observer?(.restored)
        }
    }

    private static func withCStrings<R>(_ strings: [String], _ body: (UnsafePointer<UnsafePointer<CChar>?>) -> R) -> R {
        let copies = strings.map { strdup($0) }
        defer { copies.forEach { free($0) } }
        let pointers = copies.map { UnsafePointer($0) } + [nil]
        return pointers.withUnsafeBufferPointer { body($0.baseAddress!) }
    }

    /// The live connection, connecting again if it was lost (outside a transaction).
    private func live() throws(VaultError) -> OpaquePointer {
        if let handle { return handle }
        let reason = lost ?? "not connected to PostgreSQL at \(displayName)"
        if inTransaction { throw .storageUnreachable(reason) }
        if SystemCall.monotonicSeconds() < retryAfter { throw .storageUnreachable(reason) }
        try connect()
        guard let handle else { throw .storageUnreachable(reason) }
        return handle
    }

    /// Drops the connection; the first loss of an outage is told to the observer.
    private func lose(_ reason: String) -> VaultError {
        if let handle { PQfinish(handle) }
        handle = nil
        statements = [:]
        deferred = []
        if lost == nil {
            lost = reason
            observer?(.lost(reason: reason))
        }
        return .storageUnreachable(reason)
    }

    /// A failed attempt to connect; during an outage, its latest cause is what calls report.
    private func unreachable(_ reason: String) -> VaultError {
        if lost != nil { lost = reason }
        return .storageUnreachable(reason)
    }

    /// Whether the connection is up; false from a loss until a call connects again.
    var isConnected: Bool { handle != nil }

    /// Connects again now if the connection was lost: a transaction whose first statements
    /// are deferred would otherwise find the loss inside itself, where no reconnecting happens.
    func reconnectIfLost() throws(VaultError) {
        _ = try live()
    }

    // MARK: exchanging with the server

    /// Sends with `send` and waits for every result within the timeout. Gives the first failed
    /// result, or else the last one; the caller clears it.
    private func exchange(_ send: (OpaquePointer) -> Int32) throws(VaultError) -> OpaquePointer {
        let connection = try live()
        exchanges += 1
        guard send(connection) == 1 else { throw lostOrFailed(nil) }
        let deadline = try sent(connection)
        var kept: OpaquePointer?
        do throws(VaultError) {
            while true {
                while PQisBusy(connection) == 1 {
                    _ = try wait(connection, for: Int16(POLLIN), until: deadline)
                    guard PQconsumeInput(connection) == 1 else { throw lostOrFailed(nil) }
                }
                guard let result = PQgetResult(connection) else { break }
                // The first failure is the one to report; else the last result (the schema's
                // several statements end with the one that counts).
                if let previous = kept, PostgresConnection.failed(previous) {
                    PQclear(result)
                } else {
                    PQclear(kept)
                    kept = result
                }
            }
        } catch {
            PQclear(kept)
            throw error
        }
        guard let kept else { throw lostOrFailed(nil) }
        return kept
    }

    /// Flushes what was sent without blocking (a large value to a server that stopped reading
    /// would otherwise block in write(2) past any deadline); gives the deadline for the answer.
    private func sent(_ connection: OpaquePointer) throws(VaultError) -> Double {
        let deadline = SystemCall.monotonicSeconds() + Double(location.queryTimeoutSeconds)
        while true {
            let flushed = PQflush(connection)
            if flushed == 0 { break }
            guard flushed == 1 else { throw lostOrFailed(nil) }
            let ready = try wait(connection, for: Int16(POLLOUT | POLLIN), until: deadline)
            if ready & Int16(POLLIN) != 0, PQconsumeInput(connection) != 1 { throw lostOrFailed(nil) }
        }
        return deadline
    }

    /// The next result, waiting for it within the deadline; nil ends one statement's results.
    private func nextResult(_ connection: OpaquePointer, until deadline: Double) throws(VaultError) -> OpaquePointer? {
        while PQisBusy(connection) == 1 {
            _ = try wait(connection, for: Int16(POLLIN), until: deadline)
            guard PQconsumeInput(connection) == 1 else { throw lostOrFailed(nil) }
        }
        return PQgetResult(connection)
    }

    private static func failed(_ result: OpaquePointer) -> Bool {
        let status = PQresultStatus(result)
        return status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK
    }

    /// Waits for `events` on the connection's socket; past the deadline the connection is
    /// dropped (the server may be stopped: a cancel request would wait on it too).
    private func wait(_ connection: OpaquePointer, for events: Int16, until deadline: Double) throws(VaultError) -> Int16 {
        while true {
            let remaining = deadline - SystemCall.monotonicSeconds()
            guard remaining > 0 else {
                throw lose("PostgreSQL at \(displayName) did not answer within \(location.queryTimeoutSeconds) s")
            }
            let ready: Int16
            do {
                ready = try SystemCall.poll(PQsocket(connection), for: events, within: .seconds(min(remaining, Double(Int32.max) / 1000)))
            } catch {
                throw lose("PostgreSQL at \(displayName): poll: \(error)")
            }
            if ready != 0 { return ready }
        }
    }

    /// A loss when the connection is not usable any more, else the server's error.
    private func lostOrFailed(_ result: OpaquePointer?) -> VaultError {
        guard let handle else { return .storageUnreachable(lost ?? displayName) }
        if PQstatus(handle) != CONNECTION_OK {
            return lose("lost the connection to PostgreSQL at \(displayName): \(PostgresConnection.text(PQerrorMessage(handle)))")
        }
        return failure(result)
    }

    /// Maps a failed result onto the vault's errors; the one place that does so. Only the
    /// server's primary message is kept: its DETAIL may quote a row's values.
    private func failure(_ result: OpaquePointer?) -> VaultError {
        guard let result, let handle else { return .storageFailure("PostgreSQL: \(handle.map { PostgresConnection.text(PQerrorMessage($0)) } ?? "")") }
        let state = PostgresConnection.text(PQresultErrorField(result, Int32(UInt8(ascii: "C"))))
        let message = PostgresConnection.text(PQresultErrorField(result, Int32(UInt8(ascii: "M"))))
        // Connection exceptions and a server shutting down (57P01-57P03): this session is over.
        if PQstatus(handle) != CONNECTION_OK || state.hasPrefix("08") || state.hasPrefix("57P0") {
            return lose("lost the connection to PostgreSQL at \(displayName): \(message)")
        }
        lastFailureState = state
        switch state {
        case "53100": return .diskFull
        // A write's check of what it knew (the vault's count, an id it took) found otherwise.
        case "22012": return .integrityFailure("the vault's PostgreSQL rows (changed under a write that checked them)")
        // Our own writes check for conflicts first; a violated constraint means edited tables.
        case "23505", "23502": return .integrityFailure("the vault's PostgreSQL tables (\(message))")
        default: return .storageFailure("PostgreSQL: \(message) (SQLSTATE \(state))")
        }
    }

    /// Runs SQL without parameters, possibly several statements (the schema).
    func execute(_ sql: String) throws(VaultError) {
        try flush()
        let result = try exchange { PQsendQuery($0, sql) }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else { throw lostOrFailed(result) }
    }

    private func newStatementName() -> String {
        statementNumber += 1
        return "kcfs\(statementNumber)"
    }

    /// Types from the first call's arguments: each statement binds the same kinds each time.
    private static func types(_ arguments: [PGValue]) -> [Oid] {
        arguments.map { argument in
            switch argument {
            case .integer: return 20  // int8
            case .bytes: return 17  // bytea
            case .text: return 25  // text
            case .null: return 0  // inferred
            }
        }
    }

    /// Sends prepared statement `name` with `arguments` in binary, without waiting.
    private static func send(_ connection: OpaquePointer, _ name: String, _ arguments: [PGValue]) -> Int32 {
        // Copies freed here: libpq reads them only during the call. A null pointer is SQL
        // NULL, so an empty value still gets one byte of storage.
        var lengths: [Int32] = []
        var values: [UnsafeMutablePointer<CChar>?] = []
        defer { for value in values { value?.deallocate() } }
        for argument in arguments {
            let bytes: [UInt8]
            switch argument {
            case .integer(let value): bytes = withUnsafeBytes(of: value.bigEndian) { Array($0) }
            case .bytes(let value): bytes = value
            case .text(let value): bytes = Array(value.utf8)
            case .null:
                values.append(nil)
                lengths.append(0)
                continue
            }
            let copy = UnsafeMutablePointer<CChar>.allocate(capacity: max(bytes.count, 1))
            bytes.withUnsafeBytes { UnsafeMutableRawPointer(copy).copyMemory(from: $0.baseAddress ?? UnsafeRawPointer(copy), byteCount: $0.count) }
            values.append(copy)
            lengths.append(Int32(bytes.count))
        }
        let formats = [Int32](repeating: 1, count: arguments.count)
        let pointers = values.map { UnsafePointer($0) }
        return pointers.withUnsafeBufferPointer { pointers in
            PQsendQueryPrepared(connection, name, Int32(arguments.count), pointers.baseAddress, lengths, formats, 1)
        }
    }

    /// Runs one prepared statement; gives its rows and the number of rows it changed. Sends
    /// the deferred statements ahead of it, in the same round trip.
    @discardableResult
    func query(_ sql: String, _ arguments: [PGValue] = []) throws(VaultError) -> (rows: [[PGValue]], changed: Int) {
        // A statement not prepared yet is prepared in the same flight as its first run.
        guard deferred.isEmpty, let name = statements[sql] else {
            deferred.append(Statement(sql: sql, arguments: arguments, completion: nil))
            return try pipeline()
        }
        let result = try exchange { connection in PostgresConnection.send(connection, name, arguments) }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else { throw lostOrFailed(result) }
        return PostgresConnection.outcome(result)
    }

    /// A statement held back, and what its result is checked or noted by when it comes.
    struct Statement {
        let sql: String
        let arguments: [PGValue]
        let completion: ((_ rows: [[PGValue]], _ changed: Int) throws(VaultError) -> Void)?
    }

    /// Defers `sql` while `defers` (inside the owner's transactions), else runs it now; its
    /// `completion` runs once its result is in. A failure is thrown by the call that sends it,
    /// mapped as it would have been at once: a transaction fails whole either way.
    func later(_ sql: String, _ arguments: [PGValue] = [],
               completion: ((_ rows: [[PGValue]], _ changed: Int) throws(VaultError) -> Void)? = nil) throws(VaultError) {
        guard defers else {
            let (rows, changed) = try query(sql, arguments)
            try completion?(rows, changed)
            return
        }
        deferred.append(Statement(sql: sql, arguments: arguments, completion: completion))
    }

    /// The SQLSTATE of the last statement that failed: a write's check of the rows it knew
    /// (a division by zero, 22012) is retried by the owner, where other failures are not.
    private(set) var lastFailureState: String?

    /// Set by the owner while statements may wait for the next round trip.
    var defers = false

    /// Sends the deferred statements now, in one round trip.
    func flush() throws(VaultError) {
        guard !deferred.isEmpty else { return }
        _ = try pipeline()
    }

    /// How many exchanges with the server were made: a transaction that made none since its
    /// deferred BEGIN sent nothing, and needs no COMMIT either.
    private(set) var exchanges = 0

    /// Forgets the deferred statements unsent (a transaction given up before they went).
    func discardDeferred() { deferred = [] }

    /// Sends every deferred statement (the last the one waited for) in pipeline mode, with one
    /// sync: one round trip. After a failure the server skips the rest up to the sync, so the
    /// first failure is the one reported; completions run in order once all results are in.
    private func pipeline() throws(VaultError) -> (rows: [[PGValue]], changed: Int) {
        let batch = deferred
        deferred = []
        lastFailureState = nil
        let connection = try live()
        exchanges += 1
        // Half a pipeline sent leaves the connection in no state to go on with: dropped.
        func broken() -> VaultError {
            lose("lost the connection to PostgreSQL at \(displayName): \(PostgresConnection.text(PQerrorMessage(connection)))")
        }
        guard PQenterPipelineMode(connection) == 1 else { throw broken() }
        var fresh: [String] = []
        // Per message sent: nil for a Parse, else the batch's index.
        var expected: [Int?] = []
        for (index, statement) in batch.enumerated() {
            let name: String
            if let known = statements[statement.sql] {
                name = known
            } else {
                name = newStatementName()
                let types = PostgresConnection.types(statement.arguments)
                guard PQsendPrepare(connection, name, statement.sql, Int32(types.count), types.isEmpty ? nil : types) == 1 else {
                    throw broken()
                }
                statements[statement.sql] = name
                fresh.append(statement.sql)
                expected.append(nil)
            }
            guard PostgresConnection.send(connection, name, statement.arguments) == 1 else { throw broken() }
            expected.append(index)
        }
        guard PQpipelineSync(connection) == 1 else { throw broken() }
        var outcomes = [(rows: [[PGValue]], changed: Int)](repeating: ([], 0), count: batch.count)
        var failure: VaultError?
        do throws(VaultError) {
            let deadline = try sent(connection)
            reading: for slot in expected {
                // One result per message, then nil; an aborted one (after a failure) says nothing.
                while let result = try nextResult(connection, until: deadline) {
                    defer { PQclear(result) }
                    let status = PQresultStatus(result)
                    if status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK {
                        if let slot { outcomes[slot] = PostgresConnection.outcome(result) }
                    } else if status != PGRES_PIPELINE_ABORTED, failure == nil {
                        failure = lostOrFailed(result)
                        // A failure that ended the session closed the connection too.
                        if handle == nil { break reading }
                    }
                }
            }
            if handle != nil {
                guard let sync = try nextResult(connection, until: deadline) else { throw broken() }
                let synced = PQresultStatus(sync) == PGRES_PIPELINE_SYNC
                PQclear(sync)
                guard synced, PQexitPipelineMode(connection) == 1 else { throw broken() }
            }
        } catch {
            failure = failure ?? error
        }
        if let failure {
            for sql in fresh { statements[sql] = nil }
            throw failure
        }
        for (index, statement) in batch.enumerated() {
            try statement.completion?(outcomes[index].rows, outcomes[index].changed)
        }
        return outcomes[batch.count - 1]
    }

    /// A successful result's rows and the number of rows it changed.
    private static func outcome(_ result: OpaquePointer) -> (rows: [[PGValue]], changed: Int) {
        var rows: [[PGValue]] = []
        for row in 0..<PQntuples(result) {
            var values: [PGValue] = []
            for column in 0..<PQnfields(result) {
                values.append(PostgresConnection.value(result, row, column))
            }
            rows.append(values)
        }
        let changed = Int(text(PQcmdTuples(result))) ?? 0
        return (rows, changed)
    }

    /// One field of a binary result, by its type.
    private static func value(_ result: OpaquePointer, _ row: Int32, _ column: Int32) -> PGValue {
        if PQgetisnull(result, row, column) == 1 { return .null }
        let count = Int(PQgetlength(result, row, column))
        let bytes = PQgetvalue(result, row, column).map { UnsafeRawBufferPointer(start: $0, count: count) }
            ?? UnsafeRawBufferPointer(start: nil, count: 0)
        func bigEndian() -> Int64 {
            var value: Int64 = bytes.count > 0 && Int8(bitPattern: bytes[0]) < 0 ? -1 : 0
            for byte in bytes { value = value << 8 | Int64(byte) }
            return value
        }
        switch PQftype(result, column) {
        case 20, 21, 23: return .integer(bigEndian())
        case 16: return .integer(bytes.first.map(Int64.init) ?? 0)
        case 25, 1043: return .text(String(decoding: bytes, as: UTF8.self))
        default: return .bytes(Array(bytes))
        }
    }

    func rows(_ sql: String, _ arguments: [PGValue] = []) throws(VaultError) -> [[PGValue]] {
        try query(sql, arguments).rows
    }

    func row(_ sql: String, _ arguments: [PGValue] = []) throws(VaultError) -> [PGValue]? {
        try rows(sql, arguments).first
    }

    @discardableResult
    func run(_ sql: String, _ arguments: [PGValue] = []) throws(VaultError) -> Int {
        try query(sql, arguments).changed
    }

    func integer(_ sql: String, _ arguments: [PGValue] = []) throws(VaultError) -> Int64 {
        guard let value = try row(sql, arguments)?.first?.integer else { throw .storageFailure("PostgreSQL: no result") }
        return value
    }

    /// LISTENs on `channel` (an identifier, quoted here), on this connection and every later one.
    func listen(_ channel: String) throws(VaultError) {
        if !channels.contains(channel) { channels.append(channel) }
        try execute("LISTEN \(try quoted(channel))")
    }

    private func quoted(_ identifier: String) throws(VaultError) -> String {
        let connection = try live()
        guard let quoted = PQescapeIdentifier(connection, identifier, identifier.utf8.count) else { throw lostOrFailed(nil) }
        defer { PQfreemem(quoted) }
        return String(cString: quoted)
    }

    /// How many notifications sent by other sessions arrived since the last call; reads what the
    /// socket holds without waiting.
    func notificationsFromOthers() throws(VaultError) -> Int {
        let connection = try live()
        guard PQconsumeInput(connection) == 1 else { throw lostOrFailed(nil) }
        let own = PQbackendPID(connection)
        var count = 0
        while let notification = PQnotifies(connection) {
            if notification.pointee.be_pid != own { count += 1 }
            PQfreemem(notification)
        }
        return count
    }

    /// One notification: the backend that sent it and its payload (node ids, never plaintext).
    struct Notice {
        let sender: Int32
        let payload: String
    }

    /// Waits in poll(2) on the connection's socket, up to `timeout` seconds, for notifications
    /// on the channels it LISTENs to; gives those received (none on a timeout). Throws once the
    /// connection is lost: a terminated backend or a stopped server closes the socket, which
    /// poll reports as readable and libpq then reads as the end.
    func awaitNotices(timeout: Double) throws(VaultError) -> [Notice] {
        var notices = try receivedNotices()
        guard notices.isEmpty else { return notices }
        let socket = PQsocket(try live())
        do {
            _ = try SystemCall.poll(socket, for: Int16(POLLIN), within: .seconds(max(timeout, 0)))
        } catch {
            throw lose("cannot wait for PostgreSQL at \(displayName): \(error)")
        }
        notices = try receivedNotices()
        return notices
    }

    private func receivedNotices() throws(VaultError) -> [Notice] {
        let connection = try live()
        guard PQconsumeInput(connection) == 1, PQstatus(connection) == CONNECTION_OK else { throw lostOrFailed(nil) }
        var notices: [Notice] = []
        while let notification = PQnotifies(connection) {
            let payload = notification.pointee.extra.map { String(cString: $0) } ?? ""
            notices.append(Notice(sender: notification.pointee.be_pid, payload: payload))
            PQfreemem(notification)
        }
        return notices
    }
}
