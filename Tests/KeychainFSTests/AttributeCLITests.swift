import Foundation
import Testing

/// The attribute commands through the real binary: `set --attr`, `attr`, `find`, and the JSON
/// forms of `get`, `ls -l`, `attr` and `find`. Each command opens the vault anew, so what one
/// prints another has read back from the file.
@Suite(.tags(.slow)) struct AttributeCLITests {
    private func json(_ result: RunResult) throws -> Any {
        try JSONSerialization.jsonObject(with: result.stdout)
    }

    @Test func setWithAttributesStoresBothAndAttrListsThem() throws {
        let f = try CLIFixture()
        let set = try f.cli(["set", "app/token", "s3cret", "--attr", "service=github", "--attr", "account=me@example.org",
                             "--attr", "comment=a=b c"])
        #expect(set.exitStatus == .success, "\(set.stderr)")
        #expect(try f.cli(["get", "app/token"]).stdoutText == "s3cret")
        #expect(try f.cli(["attr", "app/token"]).stdoutText == "account=me@example.org\ncomment=a=b c\nservice=github\n")
        let one = try f.cli(["attr", "app/token", "service"])
        #expect(one.exitStatus == .success && one.stdoutText == "github")
        // From standard input too, with the attributes in the same command.
        #expect(try f.cli(["set", "app/pw", "--attr", "label=Password"], stdin: Data("pw\n".utf8)).exitStatus == .success)
        #expect(try f.cli(["get", "app/pw"]).stdoutText == "pw\n")
        #expect(try f.cli(["attr", "app/pw"]).stdoutText == "label=Password\n")
    }

    @Test func attrSetsPrintsAndRemoves() throws {
        let f = try CLIFixture()
        try f.cli(["set", "a", "v"])
        try f.cli(["mkdir", "dict"])
        #expect(try f.cli(["attr", "a", "label=First"]).exitStatus == .success)
        #expect(try f.cli(["attr", "a", "label=Second"]).exitStatus == .success)
        #expect(try f.cli(["attr", "dict", "service=dictionaries have them too"]).exitStatus == .success)
        #expect(try f.cli(["attr", "a", "label"]).stdoutText == "Second")
        #expect(try f.cli(["attr", "dict"]).stdoutText == "service=dictionaries have them too\n")
        #expect(try f.cli(["attr", "a", "empty="]).exitStatus == .success)
        #expect(try f.cli(["attr", "a"]).stdoutText == "empty=\nlabel=Second\n")

        let missing = try f.cli(["attr", "a", "nope"])
        #expect(missing.exitStatus == .notFound)
        #expect(missing.stderr == "keychainfs: a, attribute \"nope\": no such attribute\n")
        #expect(try f.cli(["attr", "a", "--remove", "label"]).exitStatus == .success)
        #expect(try f.cli(["attr", "a", "--remove", "label"]).exitStatus == .notFound)
        #expect(try f.cli(["attr", "a"]).stdoutText == "empty=\n")
        #expect(try f.cli(["attr", "missing/item"]).exitStatus == .notFound)

        let tooLong = try f.cli(["attr", "a", String(repeating: "n", count: 256) + "=v"])
        #expect(tooLong.exitStatus == .invalidInput && tooLong.stderr.contains("at most 255 bytes"))
        let tooLarge = try f.cli(["attr", "a", "big=" + String(repeating: "x", count: 65537)])
        #expect(tooLarge.exitStatus == .invalidInput && tooLarge.stderr.contains("65537 bytes exceeds the limit of 65536"))
        #expect(try f.cli(["attr", "a", "big"]).exitStatus == .notFound)
        #expect(try f.cli(["attr", "a", "=v"]).exitStatus == .invalidInput)
        #expect(try f.cli(["attr", "a", "x", "--remove", "y"]).exitStatus == .usage)
        #expect(try f.cli(["verify"]).exitStatus == .success)
    }

    @Test func findPrintsMatchesAndExitsFourOnNone() throws {
        let f = try CLIFixture()
        try f.cli(["set", "web/github", "1", "--attr", "service=github", "--attr", "account=alice"])
        try f.cli(["set", "cli/github", "2", "--attr", "service=github", "--attr", "account=bob"])
        try f.cli(["set", "gitlab", "3", "--attr", "service=gitlab", "--attr", "account=alice"])
        let both = try f.cli(["find", "service=github"])
        #expect(both.exitStatus == .success && both.stdoutText == "cli/github\nweb/github\n")
        #expect(try f.cli(["find", "service=github", "account=alice"]).stdoutText == "web/github\n")
        #expect(try f.cli(["find", "account=alice"]).stdoutText == "gitlab\nweb/github\n")
        let none = try f.cli(["find", "service=github", "account=carol"])
        #expect(none.exitStatus == .notFound && none.stdout.isEmpty)
        #expect(none.stderr == "keychainfs: no item has all of these attributes\n")
        #expect(try f.cli(["find"]).exitStatus == .usage)
        #expect(try f.cli(["find", "service"]).exitStatus == .invalidInput)

        // A rename shows in the next search; a removed item is gone from it.
        try f.cli(["mv", "web/github", "web/renamed"])
        #expect(try f.cli(["find", "account=alice", "service=github"]).stdoutText == "web/renamed\n")
        try f.cli(["rm", "-r", "web"])
        #expect(try f.cli(["find", "account=alice", "service=github"]).exitStatus == .notFound)
    }

    @Test func jsonOutputs() throws {
        let f = try CLIFixture()
        try f.cli(["set", "app/token", "s3cret", "--attr", "service=github", "--attr", "label=Token \"quoted\""])
        try f.cli(["set", "app/binary"], stdin: Data([0xFF, 0x00, 0x41]))
        try f.cli(["attr", "app", "comment=the app's dictionary"])

        let get = try json(try f.cli(["get", "app/token", "--json"])) as? [String: Any]
        #expect(get?["path"] as? String == "app/token")
        #expect(get?["value"] as? String == "s3cret")
        #expect(get?["encoding"] as? String == "utf-8")
        #expect(get?["attributes"] as? [String: String] == ["service": "github", "label": "Token \"quoted\""])
        let binary = try json(try f.cli(["get", "app/binary", "--json"])) as? [String: Any]
        #expect(binary?["encoding"] as? String == "base64")
        #expect(binary?["value"] as? String == Data([0xFF, 0x00, 0x41]).base64EncodedString())
        #expect((binary?["attributes"] as? [String: Any])?.isEmpty == true)

        let attr = try json(try f.cli(["attr", "app", "--json"])) as? [String: Any]
        #expect(attr?["path"] as? String == "app")
        #expect(attr?["attributes"] as? [String: String] == ["comment": "the app's dictionary"])

        let find = try json(try f.cli(["find", "service=github", "--json"])) as? [[String: Any]]
        #expect(find?.count == 1)
        #expect(find?.first?["path"] as? String == "app/token")
        #expect(find?.first?["attributes"] as? [String: String] == ["service": "github", "label": "Token \"quoted\""])
        #expect(find?.first?["value"] == nil)
        let noMatch = try f.cli(["find", "service=none", "--json"])
        #expect(noMatch.exitStatus == .notFound && noMatch.stdoutText == "[]\n")

        let ls = try json(try f.cli(["ls", "-l", "--json", "app"])) as? [[String: Any]]
        #expect(ls?.map { $0["name"] as? String } == ["binary", "token"])
        #expect(ls?.map { $0["kind"] as? String } == ["item", "item"])
        #expect(ls?.map { $0["size"] as? Int } == [3, 6])
        #expect(ls?.last?["attributes"] as? [String: String] == ["service": "github", "label": "Token \"quoted\""])
        #expect((ls?.last?["modified"] as? String)?.hasSuffix("Z") == true)
        let root = try json(try f.cli(["ls", "--json"])) as? [[String: Any]]
        #expect(root?.first?["kind"] as? String == "dictionary")
        #expect(root?.first?["attributes"] as? [String: String] == ["comment": "the app's dictionary"])
    }
}
