import Foundation
import Glibc
import Testing

/// A small, seedable generator, so a failing run can be replayed from its seed.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64
    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// What the filesystem should hold: files by path, and directories ("" is the root).
struct FilesystemModel {
    var files: [String: [UInt8]] = [:]
    var directories: Set<String> = [""]

    func exists(_ path: String) -> Bool { files[path] != nil || directories.contains(path) }

    func parent(_ path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "" }
        return String(path[..<slash])
    }

    func children(_ directory: String) -> [String] {
        let prefix = directory.isEmpty ? "" : directory + "/"
        return (Array(files.keys) + directories.filter { !$0.isEmpty })
            .filter { $0.hasPrefix(prefix) && !$0.dropFirst(prefix.count).contains("/") }
            .map { String($0.dropFirst(prefix.count)) }
            .sorted()
    }

    /// rename(2) on the model: the errno it should give, applying it when that is 0.
    mutating func rename(_ source: String, _ target: String) -> Int32 {
        guard exists(source) else { return ENOENT }
        if source == target { return 0 }
        let sourceIsDirectory = directories.contains(source)
        if sourceIsDirectory && target.hasPrefix(source + "/") { return EINVAL }
        // Linux refuses to rename onto an ancestor of the source before asking the filesystem.
        if source.hasPrefix(target + "/") { return ENOTEMPTY }
        if exists(target) {
            let targetIsDirectory = directories.contains(target)
            if !sourceIsDirectory && targetIsDirectory { return EISDIR }
            if sourceIsDirectory && !targetIsDirectory { return ENOTDIR }
            if targetIsDirectory && !children(target).isEmpty { return ENOTEMPTY }
            files[target] = nil
            directories.remove(target)
        }
        if sourceIsDirectory {
            let prefix = source + "/"
            directories = Set(directories.map { $0 == source ? target : $0.hasPrefix(prefix) ? target + "/" + $0.dropFirst(prefix.count) : $0 })
            files = Dictionary(uniqueKeysWithValues: files.map { ($0.key.hasPrefix(prefix) ? target + "/" + $0.key.dropFirst(prefix.count) : $0.key, $0.value) })
        } else {
            files[target] = files.removeValue(forKey: source)
        }
        return 0
    }
}

@Suite(.tags(.mount, .slow)) struct MountModelTests {
    /// In the spirit of fsx: thousands of random operations applied to the mount and to the
    /// model, compared after every step (touched paths) and every 50 steps (whole tree).
    @Test func randomOperationsMatchTheModel() throws {
        let seed = UInt64(ProcessInfo.processInfo.environment["KEYCHAINFS_MODEL_SEED"] ?? "") ?? UInt64.random(in: 0...UInt64.max)
        let steps = Int(ProcessInfo.processInfo.environment["KEYCHAINFS_MODEL_STEPS"] ?? "") ?? 2000
        var rng = SplitMix64(state: seed)
        let m = try MountFixture()
        var model = FilesystemModel()
        let names = ["a", "b", "c", "d"]
        func real(_ path: String) -> String { m.path(path) }
        func randomPath() -> String {
            let directory = model.directories.sorted().randomElement(using: &rng)!
            let name = names.randomElement(using: &rng)!
            return directory.isEmpty ? name : directory + "/" + name
        }
        func randomBytes(_ count: Int) -> [UInt8] { (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) } }

        func check(_ path: String, _ step: Int, _ what: String) {
            if let expected = model.files[path] {
                let actual = readFile(real(path))
                #expect(actual == expected, "seed \(seed) step \(step) \(what): content of \(path) differs (\(actual?.count ?? -1) vs \(expected.count) bytes)")
                var st = stat()
                #expect(stat(real(path), &st) == 0 && Int(st.st_size) == expected.count, "seed \(seed) step \(step): size of \(path)")
            } else if model.directories.contains(path) {
                #expect(listing(real(path)) == model.children(path), "seed \(seed) step \(step) \(what): listing of \(path)")
            } else {
                var st = stat()
                #expect(stat(real(path), &st) != 0 && errno == ENOENT, "seed \(seed) step \(step) \(what): \(path) should not exist")
            }
        }

        var failures = 0
        for step in 0..<steps where failures == 0 {
            let path = randomPath()
            var touched = [path, model.parent(path)]
            var expected: Int32 = 0
            var actual: Int32 = 0
            let what: String
            switch Int.random(in: 0..<100, using: &rng) {
            case 0..<20:
                what = "create"
                let content = randomBytes(Int.random(in: 0...3000, using: &rng))
                expected = model.exists(path) ? EEXIST : 0
                actual = writeFile(real(path), content, flags: O_WRONLY | O_CREAT | O_EXCL)
                if expected == 0 { model.files[path] = content }
            case 20..<40:
                what = "write at offset"
                let content = randomBytes(Int.random(in: 1...2000, using: &rng))
                let offset = Int.random(in: 0...4000, using: &rng)
                if var old = model.files[path] {
                    let fd = open(real(path), O_WRONLY | O_CLOEXEC)
                    let n = content.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, off_t(offset)) }
                    actual = n == content.count ? (close(fd) == 0 ? 0 : errno) : errno
                    if old.count < offset + content.count { old += [UInt8](repeating: 0, count: offset + content.count - old.count) }
                    old.replaceSubrange(offset..<(offset + content.count), with: content)
                    model.files[path] = old
                } else {
                    expected = model.directories.contains(path) ? EISDIR : ENOENT
                    actual = errnoOf { open(real(path), O_WRONLY) }
                }
            case 40..<50:
                what = "truncate"
                let size = Int.random(in: 0...5000, using: &rng)
                if var old = model.files[path] {
                    old = size <= old.count ? Array(old[..<size]) : old + [UInt8](repeating: 0, count: size - old.count)
                    model.files[path] = old
                } else {
                    expected = model.directories.contains(path) ? EISDIR : ENOENT
                }
                actual = errnoOf { truncate(real(path), off_t(size)) }
            case 50..<65:
                let target = randomPath()
                what = "rename to \(target)"
                touched += [target, model.parent(target)]
                expected = model.rename(path, target)
                actual = errnoOf { Glibc.rename(real(path), real(target)) }
            case 65..<75:
                what = "unlink"
                expected = model.files[path] != nil ? 0 : model.directories.contains(path) ? EISDIR : ENOENT
                if expected == 0 { model.files[path] = nil }
                actual = errnoOf { unlink(real(path)) }
            case 75..<85:
                what = "mkdir"
                expected = model.exists(path) ? EEXIST : 0
                if expected == 0 { model.directories.insert(path) }
                actual = errnoOf { mkdir(real(path), 0o700) }
            case 85..<92:
                what = "rmdir"
                if model.directories.contains(path) {
                    expected = model.children(path).isEmpty ? 0 : ENOTEMPTY
                    if expected == 0 { model.directories.remove(path) }
                } else {
                    expected = model.files[path] != nil ? ENOTDIR : ENOENT
                }
                actual = errnoOf { rmdir(real(path)) }
            default:
                what = "read"
            }
            if actual != expected {
                Issue.record("seed \(seed) step \(step) \(what) \(path): errno \(actual), expected \(expected)")
                failures += 1
            }
            for path in Set(touched) { check(path, step, what) }
            if step % 50 == 49 {
                for directory in model.directories { check(directory, step, "tree") }
            }
        }
        for path in model.files.keys { check(path, steps, "final") }
        #expect(try m.cli.cli(["verify"]).exitStatus == .success)
        // And all of it survives an unmount and a remount.
        #expect(try m.unmount().exitStatus == .success)
        #expect(try m.mount().exitStatus == .success)
        for (path, content) in model.files { #expect(readFile(real(path)) == content, "seed \(seed): \(path) after remount") }
    }
}
