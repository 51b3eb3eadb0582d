import Glibc
import SystemCalls
import SystemPackage
import Testing

/// The layer's promises: an interrupted call is made again, a short read or write is finished,
/// a failure is a typed `Errno`. Each interruption test has a twin showing that the same
/// signals do interrupt the raw call, so that the layer is what makes the difference.
@Suite struct SystemCallTests {
    private func pipe() throws -> (read: FileDescriptor, write: FileDescriptor) {
        let ends = try FileDescriptor.pipe()
        return (ends.readEnd, ends.writeEnd)
    }

    @Test func theRawReadIsInterrupted() throws {
        let ends = try pipe()
        defer { _ = try? ends.read.close(); _ = try? ends.write.close() }
        let outcome = Slot<(Int, Errno)>()
        let thread = Interrupter {
            var byte: UInt8 = 0
            let got = read(ends.read.rawValue, &byte, 1)
            outcome.put((got, Errno.last))
        }
        thread.interrupt { outcome.value != nil }
        _ = try? [UInt8(1)].withUnsafeBytes { try ends.write.writeFully($0) }
        thread.join()
        #expect(outcome.value?.0 == -1)
        #expect(outcome.value?.1 == .interrupted)
    }

    @Test func aRetryingReadGoesOnThroughSignals() throws {
        let ends = try pipe()
        defer { _ = try? ends.read.close(); _ = try? ends.write.close() }
        let outcome = Slot<Result<UInt8, Errno>>()
        let thread = Interrupter {
            var byte: UInt8 = 0
            outcome.put(Result { () throws(Errno) in
                try SystemCall.retrying { read(ends.read.rawValue, &byte, 1) }
                return byte
            })
        }
        let handled = thread.interrupt(forMilliseconds: 200)
        #expect(handled > 0)
        #expect(outcome.value == nil, "a signal ended the read")
        try [UInt8(42)].withUnsafeBytes { try ends.write.writeFully($0) }
        thread.join()
        #expect(outcome.value == .success(42))
    }

    private static let large = (0..<(1 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 7) }

    /// A pipe holds 64 KiB: a writer of more blocks, and a signal then ends its write short.
    @Test func theRawWriteIsShortWhenInterrupted() throws {
        let ends = try pipe()
        defer { _ = try? ends.read.close(); _ = try? ends.write.close() }
        let written = Slot<Int>()
        let thread = Interrupter {
            written.put(SystemCallTests.large.withUnsafeBytes { write(ends.write.rawValue, $0.baseAddress, $0.count) })
        }
        thread.interrupt { written.value != nil }
        thread.join()
        let count = try #require(written.value)
        #expect(count > 0 && count < SystemCallTests.large.count)
    }

    @Test func writeFullyFinishesAnInterruptedWrite() throws {
        let ends = try pipe()
        defer { _ = try? ends.read.close() }
        let outcome = Slot<Result<Void, Errno>>()
        let thread = Interrupter {
            outcome.put(Result { () throws(Errno) in
                try SystemCall.typed { try SystemCallTests.large.withUnsafeBytes { try ends.write.writeFully($0) } }
            })
            _ = try? ends.write.close()
        }
        let handled = thread.interrupt(forMilliseconds: 200)
        #expect(handled > 0)
        #expect(outcome.value == nil, "a signal ended the write")
        let back = try ends.read.readToEnd()
        thread.join()
        // As one Bool: a failure would otherwise be reported as a diff of two MiB-long arrays.
        let whole = back == SystemCallTests.large
        #expect(back.count == SystemCallTests.large.count)
        #expect(whole)
        if case .failure(let error) = outcome.value { Issue.record("writeFully failed: \(error)") }
    }

    @Test func pollWaitsItsWholeTimeThroughSignals() throws {
        let ends = try pipe()
        defer { _ = try? ends.read.close(); _ = try? ends.write.close() }
        let outcome = Slot<(Result<Int16, Errno>, Duration)>()
        let thread = Interrupter {
            let start = ContinuousClock.now
            let ready = Result { () throws(Errno) in try SystemCall.poll(ends.read.rawValue, for: Int16(POLLIN), within: .milliseconds(300)) }
            outcome.put((ready, ContinuousClock.now - start))
        }
        thread.interrupt { outcome.value != nil }
        thread.join()
        let (ready, waited) = try #require(outcome.value)
        #expect(ready == .success(0))
        #expect(waited >= .milliseconds(300))
    }

    @Test func pollSaysWhatIsReady() throws {
        let ends = try pipe()
        defer { _ = try? ends.read.close(); _ = try? ends.write.close() }
        try [UInt8(1)].withUnsafeBytes { try ends.write.writeFully($0) }
        let ready = try SystemCall.poll(ends.read.rawValue, for: Int16(POLLIN), within: nil)
        #expect(ready & Int16(POLLIN) != 0)
    }

    @Test func readToEndGathersWhatComesInPieces() throws {
        let ends = try pipe()
        defer { _ = try? ends.read.close() }
        let thread = Interrupter {
            for piece in 0..<40 {
                try? [UInt8](repeating: UInt8(piece), count: 1000).withUnsafeBytes { try ends.write.writeFully($0) }
            }
            _ = try? ends.write.close()
        }
        let bytes = try ends.read.readToEnd()
        thread.join()
        #expect(bytes == (0..<40).flatMap { [UInt8](repeating: UInt8($0), count: 1000) })
    }

    @Test func readLineLeavesWhatFollows() throws {
        let ends = try pipe()
        defer { _ = try? ends.read.close() }
        try Array("first\nsecond".utf8).withUnsafeBytes { try ends.write.writeFully($0) }
        try ends.write.close()
        #expect(ends.read.readLine() == Array("first".utf8))
        #expect(ends.read.readLine() == Array("second".utf8))
        #expect(ends.read.readLine() == [])
    }

    @Test func aProcFileIsReadWhole() throws {
        let status = try FileDescriptor.contents(of: "/proc/self/status")
        let text = String(decoding: status, as: UTF8.self)
        #expect(text.contains("\nPid:\t\(getpid())\n"))
        #expect(text.hasSuffix("\n"))
        #expect(throws: Errno.noSuchFileOrDirectory) { try FileDescriptor.contents(of: "/proc/self/no-such-file") }
    }

    @Test func aChildsWaitStatus() throws {
        var pid: pid_t = 0
        let argv: [UnsafeMutablePointer<CChar>?] = ["/bin/sh", "-c", "exit 3"].map { (word: String) in strdup(word) } + [nil]
        defer { argv.forEach { free($0) } }
        #expect(posix_spawn(&pid, "/bin/sh", nil, nil, argv, nil) == 0)
        let status = try SystemCall.waitStatus(of: pid)
        #expect(status >> 8 & 0xFF == 3)
        #expect(throws: Errno.noChildProcess) { try SystemCall.waitStatus(of: pid) }
    }

    @Test func failuresAreTypedAndWordedAsStrerror() throws {
        #expect(throws: Errno.noSuchFileOrDirectory) { try SystemCall.retrying { open("/nonexistent/file", O_RDONLY) } }
        #expect(throws: Errno.badFileDescriptor) { try SystemCall.once { close(-1) } }
        let negated = Errno(negatedReturn: -ENOENT)
        #expect(negated == .noSuchFileOrDirectory)
        #expect(negated.description == String(cString: strerror(ENOENT)))
    }

    @Test func makeDirectoryIfMissingTakesAnExistingOne() throws {
        var template = Array("/tmp/keychainfs-mkdir-XXXXXX".utf8CString)
        let made = try #require(template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) })
        let directory = String(cString: made)
        defer { rmdir(directory + "/new"); rmdir(directory) }
        try SystemCall.makeDirectoryIfMissing(directory + "/new", permissions: .ownerReadWriteExecute)
        try SystemCall.makeDirectoryIfMissing(directory + "/new", permissions: .ownerReadWriteExecute)
        var info = stat()
        #expect(stat(directory + "/new", &info) == 0 && info.st_mode & 0o777 == 0o700)
        #expect(throws: Errno.noSuchFileOrDirectory) {
            try SystemCall.makeDirectoryIfMissing(directory + "/missing/new", permissions: .ownerReadWriteExecute)
        }
    }
}
