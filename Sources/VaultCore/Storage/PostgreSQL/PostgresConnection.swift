import CPostgres
import Glibc

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
final class PostgresConnection: @unchecked Sendable {
    private let handle: OpaquePointer
    /// Statement names by SQL text; prepared once per connection.
    private var statements: [String: String] = [:]
    /// What the user named the server by, for messages (the password, if any, removed).
    let displayName: String

    /// Opens a connection with a libpq URI (without the vault-name fragment).
    init(uri: String, displayName: String) throws(VaultError) {
        self.displayName = displayName
        guard let connection = PQconnectdb(uri) else { throw .storageFailure("\(displayName): out of memory") }
        guard PQstatus(connection) == CONNECTION_OK else {
            let message = PostgresConnection.text(PQerrorMessage(connection))
            PQfinish(connection)
            throw .storageFailure("cannot connect to PostgreSQL at \(displayName): \(message)")
        }
        handle = connection
    }

    deinit { PQfinish(handle) }

    private static func text(_ pointer: UnsafePointer<CChar>?) -> String {
        guard let pointer else { return "" }
        var message = String(cString: pointer)
        while message.last == "\n" || message.last == " " { message.removeLast() }
        return message
    }

    /// Maps a failed result onto the vault's errors; the one place that does so. Only the
    /// server's primary message is kept: its DETAIL may quote a row's values.
    private func failure(_ result: OpaquePointer?) -> VaultError {
        if PQstatus(handle) != CONNECTION_OK {
            return .storageFailure("lost the connection to PostgreSQL at \(displayName): \(PostgresConnection.text(PQerrorMessage(handle)))")
        }
        guard let result else { return .storageFailure("PostgreSQL: \(PostgresConnection.text(PQerrorMessage(handle)))") }
        let state = PostgresConnection.text(PQresultErrorField(result, Int32(UInt8(ascii: "C"))))
        let message = PostgresConnection.text(PQresultErrorField(result, Int32(UInt8(ascii: "M"))))
        switch state {
        case "53100": return .diskFull
        // Our own writes check for conflicts first; a violated constraint means edited tables.
        case "23505", "23502": return .integrityFailure("the vault's PostgreSQL tables (\(message))")
        default: return .storageFailure("PostgreSQL: \(message) (SQLSTATE \(state))")
        }
    }

    /// Runs SQL without parameters, possibly several statements (the schema).
    func execute(_ sql: String) throws(VaultError) {
        let result = PQexec(handle, sql)
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK else { throw failure(result) }
    }

    private func prepared(_ sql: String, _ arguments: [PGValue]) throws(VaultError) -> String {
        if let name = statements[sql] { return name }
        let name = "kcfs\(statements.count + 1)"
        // Types from the first call's arguments: each statement binds the same kinds each time.
        let types: [Oid] = arguments.map { argument in
            switch argument {
            case .integer: return 20  // int8
            case .bytes: return 17  // bytea
            case .text: return 25  // text
            case .null: return 0  // inferred
            }
        }
        let result = PQprepare(handle, name, sql, Int32(types.count), types.isEmpty ? nil : types)
        defer { PQclear(result) }
        guard PQresultStatus(result) == PGRES_COMMAND_OK else { throw failure(result) }
        statements[sql] = name
        return name
    }

    /// Runs one prepared statement; gives its rows and the number of rows it changed.
    @discardableResult
    func query(_ sql: String, _ arguments: [PGValue] = []) throws(VaultError) -> (rows: [[PGValue]], changed: Int) {
        let name = try prepared(sql, arguments)
        // Copies the caller frees: libpq reads them only during the call. A null pointer is
        // SQL NULL, so an empty value still gets one byte of storage.
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
        let result = values.map { UnsafePointer($0) }.withUnsafeBufferPointer { pointers in
            PQexecPrepared(handle, name, Int32(arguments.count), pointers.baseAddress, lengths, formats, 1)
        }
        defer { PQclear(result) }
        let status = PQresultStatus(result)
        guard status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK, let result else { throw failure(result) }
        var rows: [[PGValue]] = []
        for row in 0..<PQntuples(result) {
            var values: [PGValue] = []
            for column in 0..<PQnfields(result) {
                values.append(PostgresConnection.value(result, row, column))
            }
            rows.append(values)
        }
        let changed = Int(PostgresConnection.text(PQcmdTuples(result))) ?? 0
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

    /// LISTENs on `channel` (an identifier, quoted here).
    func listen(_ channel: String) throws(VaultError) {
        guard let quoted = PQescapeIdentifier(handle, channel, channel.utf8.count) else { throw failure(nil) }
        defer { PQfreemem(quoted) }
        try execute("LISTEN \(String(cString: quoted))")
    }

    /// How many notifications sent by other sessions arrived since the last call; reads what the
    /// socket holds without waiting.
    func notificationsFromOthers() throws(VaultError) -> Int {
        guard PQconsumeInput(handle) == 1 else { throw failure(nil) }
        let own = PQbackendPID(handle)
        var count = 0
        while let notification = PQnotifies(handle) {
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
        let socket = PQsocket(handle)
        guard socket >= 0 else { throw failure(nil) }
        var watched = pollfd(fd: socket, events: Int16(POLLIN), revents: 0)
        if poll(&watched, 1, Int32(max(timeout, 0) * 1000)) < 0 && errno != EINTR {
            throw .storageFailure("cannot wait for PostgreSQL at \(displayName): errno \(errno)")
        }
        notices = try receivedNotices()
        return notices
    }

    private func receivedNotices() throws(VaultError) -> [Notice] {
        guard PQconsumeInput(handle) == 1, PQstatus(handle) == CONNECTION_OK else { throw failure(nil) }
        var notices: [Notice] = []
        while let notification = PQnotifies(handle) {
            let payload = notification.pointee.extra.map { String(cString: $0) } ?? ""
            notices.append(Notice(sender: notification.pointee.be_pid, payload: payload))
            PQfreemem(notification)
        }
        return notices
    }
}
