import CSQLite
import Foundation
@testable import KeychainFS
import Testing

/// `allow`, `disallow` and `rules` through the real binary; each command opens the vault anew,
/// so what `rules` prints was read back from the file.
@Suite(.tags(.mount, .slow)) struct RuleCLITests {
    private func rules(_ f: CLIFixture, _ arguments: [String] = []) throws -> String {
        let result = try f.cli(["rules"] + arguments)
        #expect(result.exitStatus == .success, "\(result.stderr)")
        return result.stdoutText
    }

    private func rulesJSON(_ f: CLIFixture, _ arguments: [String] = []) throws -> [[String: Any]] {
        let result = try f.cli(["rules", "--json"] + arguments)
        #expect(result.exitStatus == .success, "\(result.stderr)")
        return try #require(try JSONSerialization.jsonObject(with: result.stdout) as? [[String: Any]])
    }

    @Test func allowListAndDisallow() throws {
        let f = try CLIFixture()
        try f.cli(["set", "app/token", "t"])
        try f.cli(["set", "other/item", "o"])
        #expect(try rules(f) == "")
        #expect(try rulesJSON(f).isEmpty)

        #expect(try f.cli(["allow", "app", "--exe", "/usr/bin/head", "--read-only"]).exitStatus == .success)
        #expect(try f.cli(["allow", "app", "--unit", "nginx.service", "--confirm"]).exitStatus == .success)
        #expect(try f.cli(["allow", "app/token", "--unit", "backup.scope", "--read-only", "--confirm"]).exitStatus == .success)
        #expect(try rules(f) == """
            app
                --exe /usr/bin/head --read-only
                --unit nginx.service --confirm
            app/token
                --unit backup.scope --read-only --confirm

            """)
        #expect(try rules(f, ["app/token"]) == "app/token\n    --unit backup.scope --read-only --confirm\n")
        #expect(try rules(f, ["other"]) == "")
        #expect(try f.cli(["rules", "missing"]).exitStatus == .notFound)

        let listed = try rulesJSON(f, ["app"])
        #expect(listed.map { $0["path"] as? String } == ["app", "app/token"])
        let appRules = try #require(listed[0]["rules"] as? [[String: Any]])
        #expect(appRules[0]["exe"] as? String == "/usr/bin/head" && appRules[0]["readOnly"] as? Bool == true
            && appRules[0]["confirm"] as? Bool == false && appRules[0]["fileChanged"] as? Bool == false && appRules[0]["unit"] == nil)
        #expect(appRules[1]["unit"] as? String == "nginx.service" && appRules[1]["confirm"] as? Bool == true
            && appRules[1]["readOnly"] as? Bool == false && appRules[1]["exe"] == nil && appRules[1]["fileChanged"] == nil)

        // The same principal again replaces the rule's flags.
        #expect(try f.cli(["allow", "app", "--exe", "/usr/bin/head"]).exitStatus == .success)
        #expect(try rules(f, ["app"]).hasPrefix("app\n    --exe /usr/bin/head\n    --unit nginx.service --confirm\n"))

        let missing = try f.cli(["disallow", "app", "--unit", "other.service"])
        #expect(missing.exitStatus == .notFound)
        #expect(missing.stderr == "keychainfs: app, --unit other.service: no such access rule\n")
        #expect(try f.cli(["disallow", "app", "--exe", "/usr/bin/head"]).exitStatus == .success)
        #expect(try rules(f, ["app"]).hasPrefix("app\n    --unit nginx.service --confirm\napp/token\n"))
        let all = try f.cli(["disallow", "app/token", "--all"])
        #expect(all.exitStatus == .success && all.stderr.contains("no rules left here"))
        #expect(try f.cli(["disallow", "app/token", "--all"]).exitStatus == .notFound)
        #expect(try rules(f) == "app\n    --unit nginx.service --confirm\n")
        // A rule survives a rename of its dictionary, and goes with it when it is removed.
        #expect(try f.cli(["mv", "app", "renamed"]).exitStatus == .success)
        #expect(try rules(f) == "renamed\n    --unit nginx.service --confirm\n")
        #expect(try f.cli(["rm", "-r", "renamed"]).exitStatus == .success)
        #expect(try rules(f) == "")
        #expect(try f.cli(["verify"]).exitStatus == .success)
    }

    @Test func aReplacedExecutableIsMarkedAndItsRuleCanStillGo() throws {
        let f = try CLIFixture()
        try f.cli(["mkdir", "app"])
        let binary = f.directory + "/tool"
        try copyExecutable("/usr/bin/head", to: binary)
        #expect(try f.cli(["allow", "app", "--exe", binary]).exitStatus == .success)
        #expect(try rules(f) == "app\n    --exe \(binary)\n")
        try copyExecutable("/usr/bin/head", to: binary + ".new")
        #expect(rename(binary + ".new", binary) == 0)
        #expect(try rules(f) == "app\n    --exe \(binary)  \(Rules.replacedNote)\n")
        #expect(try (rulesJSON(f)[0]["rules"] as? [[String: Any]])?[0]["fileChanged"] as? Bool == true)
        // Gone altogether: its rule is still removed by the path.
        try FileManager.default.removeItem(atPath: binary)
        #expect(try f.cli(["disallow", "app", "--exe", binary]).exitStatus == .success)
        #expect(try rules(f) == "")
    }

    @Test func badPrincipalsAreRefusedAndChangeNothing() throws {
        let f = try CLIFixture()
        try f.cli(["mkdir", "app"])
        let relative = try f.cli(["allow", "app", "--exe", "usr/bin/head"])
        #expect(relative.exitStatus == .invalidInput)
        #expect(relative.stderr == "keychainfs: usr/bin/head: an executable must be given by its absolute path\n")
        let missing = try f.cli(["allow", "app", "--exe", "/nonexistent/tool"])
        #expect(missing.exitStatus == .invalidInput && missing.stderr.contains("/nonexistent/tool: No such file or directory"))
        #expect(try f.cli(["allow", "app", "--exe", "/usr/bin"]).exitStatus == .invalidInput)
        let unit = try f.cli(["allow", "app", "--unit", "nginx"])
        #expect(unit.exitStatus == .invalidInput && unit.stderr.contains("nginx: a unit name ends in .service or .scope"))
        #expect(try f.cli(["allow", "app", "--unit", "a/b.service"]).exitStatus == .invalidInput)
        #expect(try f.cli(["disallow", "app", "--exe", "relative"]).exitStatus == .invalidInput)
        // Exactly one principal (or --all for disallow).
        #expect(try f.cli(["allow", "app"]).exitStatus == .usage)
        #expect(try f.cli(["allow", "app", "--exe", "/usr/bin/head", "--unit", "a.service"]).exitStatus == .usage)
        #expect(try f.cli(["disallow", "app"]).exitStatus == .usage)
        #expect(try f.cli(["disallow", "app", "--all", "--unit", "a.service"]).exitStatus == .usage)
        // A rule needs an existing path.
        #expect(try f.cli(["allow", "missing", "--unit", "a.service"]).exitStatus == .notFound)
        #expect(try rules(f) == "")
    }

    @Test func aWrongPassphraseChangesNothing() throws {
        let f = try CLIFixture()
        try f.cli(["set", "app/token", "t"])
        #expect(try f.cli(["allow", "app", "--unit", "nginx.service"]).exitStatus == .success)
        let wrong = try f.write("not the passphrase\n", to: "wrong")
        func files() -> [Data] { ["", "-wal"].map { (try? Data(contentsOf: URL(fileURLWithPath: f.vault + $0))) ?? Data() } }
        let before = files()
        for arguments in [["allow", "app", "--exe", "/usr/bin/head"], ["disallow", "app", "--all"], ["disallow", "app", "--unit", "nginx.service"],
                          ["rules"]] {
            let result = try f.cli(arguments, passphraseFile: wrong)
            #expect(result.exitStatus == .wrongPassphrase, "\(arguments): \(result.stderr)")
            #expect(result.stdoutText == "")
        }
        #expect(files() == before)
        #expect(try rules(f) == "app\n    --unit nginx.service\n")
    }

    @Test func aTamperedRuleIsAnIntegrityFailure() throws {
        let f = try CLIFixture()
        try f.cli(["set", "app/token", "t"])
        #expect(try f.cli(["allow", "app", "--unit", "nginx.service"]).exitStatus == .success)
        var db: OpaquePointer?
        #expect(sqlite3_open(f.vault, &db) == SQLITE_OK)
        #expect(sqlite3_exec(db, "DELETE FROM rules", nil, nil, nil) == SQLITE_OK)
        sqlite3_close(db)
        let listed = try f.cli(["rules"])
        #expect(listed.exitStatus == .integrityFailure && listed.stderr.contains("the access rules"), "\(listed.stderr)")
        #expect(try f.cli(["allow", "app", "--unit", "other.service"]).exitStatus == .integrityFailure)
        let verified = try f.cli(["verify"])
        #expect(verified.exitStatus == .integrityFailure && verified.stderr.contains("access rules"), "\(verified.stderr)")
    }

    @Test func rulesChangeWhileTheVaultIsMounted() throws {
        let m = try MountFixture()
        #expect(mkdir(m.path("app"), 0o700) == 0)
        #expect(try m.cli.cli(["allow", "app", "--unit", "nginx.service"]).exitStatus == .success)
        #expect(try rules(m.cli) == "app\n    --unit nginx.service\n")
        #expect(try m.cli.cli(["disallow", "app", "--all"]).exitStatus == .success)
        #expect(try rules(m.cli) == "")
    }
}
