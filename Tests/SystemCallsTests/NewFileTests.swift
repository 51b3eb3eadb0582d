import Glibc
import SystemCalls
import SystemPackage
import Testing

/// Key files appear whole or not at all: a write that cannot finish leaves neither the file nor
/// its temporary, and an existing file is never replaced.
@Suite struct NewFileTests {
    private func directory() -> String {
        var template = Array("/tmp/keychainfs-newfile-XXXXXX".utf8CString)
        _ = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
        return String(decoding: template.dropLast().map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    private func names(in directory: String) -> [String] {
        guard let dir = opendir(directory) else { return [] }
        defer { closedir(dir) }
        var names: [String] = []
        while let entry = readdir(dir) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
            if name != "." && name != ".." { names.append(name) }
        }
        return names.sorted()
    }

    @Test func aNewFileHoldsItsBytesWithMode0600() throws {
        let dir = directory()
        defer { system("rm -rf '\(dir)'") }
        let bytes: [UInt8] = Array(0..<200).map { UInt8($0) }
        try bytes.withUnsafeBytes { try NewFile.create(at: dir + "/key", contents: $0) }
        #expect(names(in: dir) == ["key"])
        var info = stat()
        #expect(stat(dir + "/key", &info) == 0)
        #expect(info.st_mode & 0o777 == 0o600)
        #expect(info.st_size == 200)
        let fd = try FileDescriptor.open(dir + "/key", .readOnly)
        defer { _ = try? fd.close() }
        var back = [UInt8](repeating: 0, count: 300)
        let read = try back.withUnsafeMutableBytes { try fd.readFully(into: $0) }
        #expect(Array(back.prefix(read)) == bytes)
    }

    @Test func anExistingFileIsNeverReplaced() throws {
        let dir = directory()
        defer { system("rm -rf '\(dir)'") }
        try [UInt8]([1]).withUnsafeBytes { try NewFile.create(at: dir + "/key", contents: $0) }
        #expect(throws: Errno.fileExists) {
            try [UInt8]([2, 2]).withUnsafeBytes { try NewFile.create(at: dir + "/key", contents: $0) }
        }
        var info = stat()
        #expect(stat(dir + "/key", &info) == 0 && info.st_size == 1)
        #expect(names(in: dir) == ["key"])
    }

    /// A full disk mid-write: no short key under the name, no temporary left behind.
    @Test func aWriteThatCannotFinishLeavesNothing() throws {
        try #require(getuid() == 0, "mounting a small tmpfs needs root")
        let dir = directory()
        defer { umount(dir); system("rm -rf '\(dir)'") }
        try #require(mount("tmpfs", dir, "tmpfs", 0, "size=16k") == 0)
        let bytes = [UInt8](repeating: 7, count: 64 * 1024)
        #expect(throws: Errno.noSpace) {
            try bytes.withUnsafeBytes { try NewFile.create(at: dir + "/key", contents: $0) }
        }
        #expect(names(in: dir) == [])
    }
}
