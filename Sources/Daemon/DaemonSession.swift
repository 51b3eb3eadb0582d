import Glibc
import Support
import VaultCore

/// The command line's side of ControlServer+Commands: the vault of a running mount or
/// secret-service, reached through its control socket without a passphrase. One connection
/// per request; secrets go out of and come back into locked memory only. A daemon's refusal
/// comes back as `VaultError.reported`, with the daemon's message and status.
package struct DaemonSession: Sendable {
    package let socket: String

    package init(socket: String) {
        self.socket = socket
    }

    package func itemSizeLimit() throws(VaultError) -> Int {
        try reading(.limits) { (_) throws(VaultError) in } answer: { (reader) throws(VaultError) in Int(try reader.integer(Int64.self)) }
    }

    package func read(_ path: VaultPath) throws(VaultError) -> SecureBuffer {
        let reply = try call(.item) { (writer) throws(VaultError) in try writer.path(path) }
        return reply
    }

    package func list(_ path: VaultPath, details: Bool) throws(VaultError) -> [EntrySummary] {
        try reading(.list) { (writer) throws(VaultError) in
            try writer.path(path)
            try writer.flag(details)
        } answer: { (reader) throws(VaultError) in
            var entries: [EntrySummary] = []
            for _ in 0..<(try reader.integer(UInt32.self)) {
                let name = try reader.name()
                let node = try NodeSummary.read(from: &reader)
                entries.append(details ? EntrySummary(name: name, node: node, attributes: try reader.attributes(), label: try reader.optionalSecret())
                                       : EntrySummary(name: name, node: node))
            }
            return entries
        }
    }

    /// The node's metadata, and for a dictionary the class items created in it get.
    package func node(at path: VaultPath) throws(VaultError) -> (node: NodeSummary, effectiveDefaultClass: AccessibilityClass?) {
        try reading(.node) { (writer) throws(VaultError) in try writer.path(path) } answer: { (reader) throws(VaultError) in
            (try NodeSummary.read(from: &reader), try reader.accessibility())
        }
    }

    package func attributes(at path: VaultPath) throws(VaultError) -> [Attribute] {
        try reading(.attributes) { (writer) throws(VaultError) in try writer.path(path) } answer: { (reader) throws(VaultError) in
            try reader.attributes()
        }
    }

    package func attribute(_ name: AttributeName, at path: VaultPath) throws(VaultError) -> SecureBuffer {
        try reading(.attribute) { (writer) throws(VaultError) in
            try writer.path(path)
            try writer.attributeName(name)
        } answer: { (reader) throws(VaultError) in try reader.secret() }
    }

    package func setAttribute(_ name: AttributeName, to value: borrowing SecureBuffer, at path: VaultPath) throws(VaultError) {
        _ = try call(.setAttribute) { (writer) throws(VaultError) in
            try writer.path(path)
            try writer.attributeName(name)
            try writer.secret(value)
        }
    }

    package func removeAttribute(_ name: AttributeName, at path: VaultPath) throws(VaultError) {
        _ = try call(.removeAttribute) { (writer) throws(VaultError) in
            try writer.path(path)
            try writer.attributeName(name)
        }
    }

    package func label(at path: VaultPath) throws(VaultError) -> SecureBuffer? {
        try reading(.label) { (writer) throws(VaultError) in try writer.path(path) } answer: { (reader) throws(VaultError) in
            try reader.optionalSecret()
        }
    }

    package func setLabel(_ label: borrowing SecureBuffer?, at path: VaultPath) throws(VaultError) {
        _ = try call(.setLabel) { (writer) throws(VaultError) in
            try writer.path(path)
            try writer.optionalSecret(label)
        }
    }

    /// The items that have every one of `pairs` and that the caller may read, with their
    /// attributes when asked for.
    package func find(_ pairs: [Attribute], withAttributes: Bool) throws(VaultError) -> [(path: VaultPath, attributes: [Attribute])] {
        try reading(.find) { (writer) throws(VaultError) in
            try writer.attributes(pairs)
            try writer.flag(withAttributes)
        } answer: { (reader) throws(VaultError) in
            var found: [(path: VaultPath, attributes: [Attribute])] = []
            for _ in 0..<(try reader.integer(UInt32.self)) {
                let path = try reader.path()
                found.append((path, withAttributes ? try reader.attributes() : []))
            }
            return found
        }
    }

    package func store(_ content: borrowing SecureBuffer, at path: VaultPath, attributes: [Attribute]) throws(VaultError) {
        _ = try call(.store) { (writer) throws(VaultError) in
            try writer.path(path)
            try writer.secret(content)
            try writer.attributes(attributes)
        }
    }

    package func remove(_ path: VaultPath, recursive: Bool) throws(VaultError) {
        _ = try call(.remove) { (writer) throws(VaultError) in
            try writer.path(path)
            try writer.flag(recursive)
        }
    }

    package func move(_ source: VaultPath, to destination: VaultPath) throws(VaultError) {
        _ = try call(.move) { (writer) throws(VaultError) in
            try writer.path(source)
            try writer.path(destination)
        }
    }

    package func makeDictionary(at path: VaultPath, withIntermediates: Bool) throws(VaultError) {
        _ = try call(.makeDictionary) { (writer) throws(VaultError) in
            try writer.path(path)
            try writer.flag(withIntermediates)
        }
    }

    package func ruleSummaries(at path: VaultPath) throws(VaultError) -> [(path: VaultPath, rules: [RuleSummary])] {
        try reading(.rules) { (writer) throws(VaultError) in try writer.path(path) } answer: { (reader) throws(VaultError) in
            var sets: [(path: VaultPath, rules: [RuleSummary])] = []
            for _ in 0..<(try reader.integer(UInt32.self)) {
                let ruled = try reader.path()
                var rules: [RuleSummary] = []
                for _ in 0..<(try reader.integer(UInt32.self)) { rules.append(try RuleSummary(from: &reader)) }
                sets.append((ruled, rules))
            }
            return sets
        }
    }

    package func accessLog(since: Int64? = nil, afterSequence: Int64? = nil) throws(VaultError) -> AccessLogReading {
        try reading(.log) { (writer) throws(VaultError) in
            for bound in [since, afterSequence] {
                try writer.flag(bound != nil)
                if let bound { try writer.integer(bound) }
            }
        } answer: { (reader) throws(VaultError) in
            var entries: [AccessLogEntry] = []
            for _ in 0..<(try reader.integer(UInt32.self)) { entries.append(try AccessLogEntryWire.read(from: &reader)) }
            var problems: [IntegrityProblem] = []
            for _ in 0..<(try reader.integer(UInt32.self)) {
                problems.append(IntegrityProblem(path: try reader.text(), reason: try reader.text()))
            }
            let last = try reader.flag() ? try reader.integer(Int64.self) : nil
            return AccessLogReading(entries: entries, problems: problems, lastSequence: last, hasMembers: try reader.flag())
        }
    }

    /// Calls `body` with every entry as the daemon streams it; returns how many were left out.
    package func exportEntries(excluding: Set<AccessibilityClass>,
                               _ body: (PortableEntry) throws(VaultError) -> Void) throws(VaultError) -> Int {
        let fd = try send(.export) { (writer) throws(VaultError) in
            try writer.integer(UInt8(excluding.count))
            for excluded in excluding { try writer.accessibility(excluded) }
        }
        defer { close(fd) }
        _ = try answer(fd, expectingPayload: false)
        while true {
            let frame = try DaemonSession.frame(fd)
            guard frame.count > 0 else { break }
            let entry = try frame.withUnsafeBytes { (raw) throws(VaultError) -> PortableEntry? in
                guard case .entry(let entry) = try ArchiveRecord.decode(raw) else { return nil }
                return entry
            }
            guard let entry else { throw ControlReader.malformed("an export's record that is no entry") }
            try body(entry)
        }
        return try DaemonSession.frame(fd).withUnsafeBytes { (raw) throws(VaultError) -> Int in
            var reader = ControlReader(raw)
            let skipped = Int(try reader.integer(UInt32.self))
            try reader.finish()
            return skipped
        }
    }

    // MARK: the exchange

    /// A request whose reply is parsed by `answer`, the whole reply read.
    private func reading<R: ~Copyable>(_ verb: ControlRequest, _ build: (inout ControlWriter) throws(VaultError) -> Void,
                            answer parse: (inout ControlReader) throws(VaultError) -> R) throws(VaultError) -> R {
        let reply = try call(verb, build)
        return try reply.withUnsafeBytes { (raw) throws(VaultError) -> R in
            var reader = ControlReader(raw)
            let value = try parse(&reader)
            try reader.finish()
            return value
        }
    }

    private func call(_ verb: ControlRequest, _ build: (inout ControlWriter) throws(VaultError) -> Void) throws(VaultError) -> SecureBuffer {
        let fd = try send(verb, build)
        defer { close(fd) }
        return try answer(fd, expectingPayload: true)
    }

    /// Connects and sends the request; the descriptor is the caller's to close.
    private func send(_ verb: ControlRequest, _ build: (inout ControlWriter) throws(VaultError) -> Void) throws(VaultError) -> Int32 {
        var writer = try ControlWriter()
        try build(&writer)
        let payload = writer.finish()
        let fd: Int32
        do throws(CommandFailure) {
            fd = try ControlSocket.connect(to: socket)
        } catch {
            throw .reported(status: error.status.rawValue, message: error.message)
        }
        // A `--confirm` rule may keep the answer waiting for the user (30 s by default).
        ControlSocket.setTimeout(fd, SO_RCVTIMEO, seconds: 120)
        ControlSocket.send(fd, "cmd \(verb.rawValue) \(payload.count)")
        guard payload.withUnsafeBytes({ Terminal.writeAll(fd, $0) }) else {
            close(fd)
            throw .reported(status: ExitStatus.failure.rawValue, message: "the daemon went away")
        }
        return fd
    }

    private func answer(_ fd: Int32, expectingPayload: Bool) throws(VaultError) -> SecureBuffer {
        let reply = ControlSocket.readLine(fd, limit: 4096)
        guard reply.hasPrefix("ok "), let count = Int(reply.dropFirst(3)), count >= 0 else {
            let failure = ControlSocket.failure(reply)
            throw .reported(status: failure.status.rawValue, message: failure.message)
        }
        var content = try SecureBuffer(capacity: max(count, 1))
        guard try SecretInput.read(fd, into: &content, exactly: count) else {
            throw .reported(status: ExitStatus.failure.rawValue, message: "the daemon stopped in the middle of its answer")
        }
        return content
    }

    private static func frame(_ fd: Int32) throws(VaultError) -> SecureBuffer {
        var length = try SecureBuffer(capacity: 4)
        guard try SecretInput.read(fd, into: &length, exactly: 4) else {
            throw .reported(status: ExitStatus.failure.rawValue, message: "the daemon stopped in the middle of the export")
        }
        let count = length.withUnsafeBytes { raw in Int(UInt32(littleEndian: raw.loadUnaligned(as: UInt32.self))) }
        var frame = try SecureBuffer(capacity: max(count, 1))
        guard try SecretInput.read(fd, into: &frame, exactly: count) else {
            throw .reported(status: ExitStatus.failure.rawValue, message: "the daemon stopped in the middle of the export")
        }
        return frame
    }
}
