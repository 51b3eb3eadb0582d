import Foundation
import Glibc
@testable import Support
import Testing
@testable import VaultCore

/// The README and the pages beside it (SECURITY.md, docs/): its own lines typed at a terminal,
/// and what they state checked against the code, so that moving text cannot leave it stale.
@Suite(.tags(.mount)) struct ReadmeTests {
    /// The README's own lines, typed at a terminal (tmux) by a person with a fresh home directory.
    @Test func theUsedByLinesWorkAsWritten() throws {
        let home = NSTemporaryDirectory() + "keychainfs-home-" + UUID().uuidString
        try FileManager.default.createDirectory(atPath: home + "/secrets", withIntermediateDirectories: true)
        let session = "readme"
        let socket = home + "/tmux.socket"
        let shell = "env -u XDG_DATA_HOME -u KEYCHAINFS_VAULT -u XDG_RUNTIME_DIR HOME=\(home) PATH=\(URL(fileURLWithPath: keychainfsBinary).deletingLastPathComponent().path):/usr/bin:/bin bash --norc --noprofile"
        // A server of its own, started with no descriptor but 0-2 and no blocked signal:
        // Foundation's Process learns that a child exited when a socket the child inherits
        // closes, so a tmux server that inherited it would keep `run` waiting for as long as the
        // server lives; and a server that inherited the runner thread's blocked SIGTERM would
        // outlive its own kill-server.
        func tmux(_ arguments: [String]) throws -> RunResult {
            let exec = "import os, signal, sys; os.closerange(3, 1 << 16); signal.pthread_sigmask(signal.SIG_SETMASK, []); os.execv(sys.argv[1], sys.argv[1:])"
            return try run("/usr/bin/python3", ["-c", exec, "/usr/bin/tmux", "-S", socket] + arguments)
        }
        defer {
            _ = try? tmux(["kill-server"])
            if isMounted(home + "/secrets") { _ = try? run("/bin/fusermount3", ["-u", "-z", home + "/secrets"]) }
            try? FileManager.default.removeItem(atPath: home)
        }
        func type(_ keys: String) throws {
            _ = try tmux(["send-keys", "-t", session, "-l", keys])
            _ = try tmux(["send-keys", "-t", session, "Enter"])
        }
        func screen() -> String { (try? tmux(["capture-pane", "-p", "-t", session]).stdoutText) ?? "" }
        func waitFor(_ text: String) throws -> Bool {
            for _ in 0..<300 {
                if screen().contains(text) { return true }
                usleep(20_000)
            }
            return false
        }
        #expect(try tmux(["new-session", "-d", "-s", session, "-x", "120", "-y", "30", shell]).status == 0)
        try type("keychainfs ~/secrets")
        #expect(try waitFor("New passphrase"))
        try type("a long passphrase typed by hand")
        #expect(try waitFor("Repeat the passphrase"))
        try type("a long passphrase typed by hand")
        #expect(try waitFor("mounted"), "\(screen())")
        #expect(!screen().contains("a long passphrase"), "the passphrase was echoed")
        try type("mkdir ~/secrets/app && echo s3cret > ~/secrets/app/token && cat ~/secrets/app/token && echo x > ~/secrets/app/pw && echo done-$?")
        #expect(try waitFor("done-0"), "\(screen())")
        #expect(screen().contains("s3cret"))
        try type("keychainfs unmount ~/secrets && echo unmounted-$?")
        #expect(try waitFor("unmounted-0"), "\(screen())")
        #expect(!isMounted(home + "/secrets"))
        #expect(FileManager.default.fileExists(atPath: home + "/.local/share/keychainfs/default.vault"))
    }

    /// The README's table of exit statuses, row for row, is the one the code has.
    @Test func theReadmesExitStatusTableIsTheCodes() throws {
        let readme = try String(contentsOfFile: readmePath, encoding: .utf8)
        let sections = readme.components(separatedBy: "### Errors and exit statuses")
        try #require(sections.count == 2, "the README has no section on exit statuses")
        let rows = sections[1].split(separator: "\n").drop { !$0.hasPrefix("| status") }.dropFirst(2)
            .prefix { $0.hasPrefix("|") }
            .map { $0.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) } }
            .map { "\($0[0]) \($0[1])" }
        #expect(rows == Support.ExitStatus.allCases.map { "\($0.rawValue) \($0.meaning)" })
    }

    /// docs/format.md names the format this code writes as the current one, and has a row for
    /// every format up to it: a new format cannot ship undocumented, nor the page go stale.
    @Test func theFormatPageNamesEveryFormatUpToTheCurrentOne() throws {
        let page = try documentation("docs/format.md")
        #expect(page.contains("The current format is **\(VaultFormat.version)**."), "docs/format.md names another current format")
        let rows = tableRows(in: page, headedBy: "| format |").compactMap { Int($0[0]) }
        #expect(rows == Array(1...VaultFormat.version))
    }

    /// Every test SECURITY.md cites for a claim exists, so a claim cannot outlive the test that
    /// attacks it; every row of its tables names a test or says that it is not defended.
    @Test func everyTestTheThreatModelCitesExists() throws {
        let page = try documentation("SECURITY.md")
        let sources = try swiftFiles(under: packageRoot + "/Tests").map { try String(contentsOfFile: $0, encoding: .utf8) }.joined()
        let rows = tableRows(in: page, headedBy: "| who |") + tableRows(in: page, headedBy: "| attack |")
        #expect(rows.count > 20)
        var cited = 0
        for row in rows {
            let testedBy = row[row.count - 1]
            let names = backticked(testedBy)
            if names.isEmpty {
                #expect(testedBy == "(not defended)" || testedBy == "(by design)", "a row of SECURITY.md names no test: \(row[0])")
            }
            for name in names {
                cited += 1
                #expect(sources.contains("func \(name)("), "SECURITY.md cites \(name), which is no test")
            }
        }
        #expect(cited > 30)
    }

    /// Every relative link between the README, SECURITY.md and docs/ leads to a file, and an
    /// anchor to a heading of it; every page in docs/ is linked from the README.
    @Test func everyLinkBetweenThePagesResolves() throws {
        let pages = ["README.md", "SECURITY.md"] + (try FileManager.default.contentsOfDirectory(atPath: packageRoot + "/docs"))
            .filter { $0.hasSuffix(".md") }.map { "docs/" + $0 }
        #expect(pages.count > 5)
        var linkedFromReadme: Set<String> = []
        for page in pages {
            let text = try documentation(page)
            let directory = (page as NSString).deletingLastPathComponent
            for link in markdownLinks(in: text) where !link.contains("://") {
                let parts = link.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).map(String.init)
                let target = parts[0].isEmpty ? page : resolved(parts[0], from: directory)
                #expect(FileManager.default.fileExists(atPath: packageRoot + "/" + target), "\(page) links to \(link), which is not there")
                if page == "README.md" { linkedFromReadme.insert(target) }
                if parts.count == 2, target.hasSuffix(".md"), let linked = try? documentation(target) {
                    #expect(headingAnchors(in: linked).contains(parts[1]), "\(page) links to \(link): no such heading")
                }
            }
        }
        for page in pages where page.hasPrefix("docs/") {
            #expect(linkedFromReadme.contains(page), "the README does not link to \(page)")
        }
    }

    /// Every option the pages show on a `keychainfs` command line is one the command has: an
    /// option renamed or removed cannot stay documented.
    @Test func everyOptionThePagesShowExists() throws {
        let completion = try run(keychainfsBinary, ["--generate-completion-script", "bash"])
        #expect(completion.status == 0)
        let options = Set(completion.stdoutText.split(whereSeparator: { !($0.isLetter || $0.isNumber || $0 == "-") })
            .filter { $0.hasPrefix("--") && $0.count > 2 }.map(String.init))
        #expect(options.contains("--lock-on-screen-lock") && options.contains("--env-dict"))
        let pages = ["README.md", "SECURITY.md"] + (try FileManager.default.contentsOfDirectory(atPath: packageRoot + "/docs"))
            .filter { $0.hasSuffix(".md") }.map { "docs/" + $0 }
        var checked = 0
        for page in pages {
            for line in keychainfsCommandLines(in: try documentation(page)) {
                for word in line.split(separator: " ") where word.hasPrefix("--") && word.count > 2 {
                    let option = String(word.prefix { $0.isLetter || $0.isNumber || $0 == "-" })
                    checked += 1
                    #expect(options.contains(option), "\(page) shows \(option), which keychainfs does not have: \(line)")
                }
            }
        }
        #expect(checked > 40)
    }
}

/// The package this test file belongs to.
let packageRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent().path

/// The README at the top of the package.
let readmePath = packageRoot + "/README.md"

private func documentation(_ page: String) throws -> String {
    try String(contentsOfFile: packageRoot + "/" + page, encoding: .utf8)
}

/// The cells of each row of the first table whose header starts with `header`.
private func tableRows(in text: String, headedBy header: String) -> [[String]] {
    text.split(separator: "\n").drop { !$0.hasPrefix(header) }.dropFirst(2).prefix { $0.hasPrefix("|") }
        .map { $0.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) } }
}

/// A relative link's path from the package's top: `..` and `.` taken away.
private func resolved(_ link: String, from directory: String) -> String {
    var components: [Substring] = []
    for component in (directory + "/" + link).split(separator: "/") where component != "." {
        if component == ".." { _ = components.popLast() } else { components.append(component) }
    }
    return components.joined(separator: "/")
}

/// The words between backticks.
private func backticked(_ text: String) -> [String] {
    text.split(separator: "`", omittingEmptySubsequences: false).enumerated().filter { $0.offset % 2 == 1 }.map { String($0.element) }
}

/// The targets of `[text](target)` links.
private func markdownLinks(in text: String) -> [String] {
    var links: [String] = []
    var rest = Substring(text)
    while let start = rest.range(of: "](") {
        let after = rest[start.upperBound...]
        guard let end = after.firstIndex(of: ")") else { break }
        links.append(String(after[..<end]))
        rest = after[end...]
    }
    return links
}

/// The anchors GitHub gives a page's headings: lower case, spaces to hyphens, other punctuation dropped.
private func headingAnchors(in text: String) -> Set<String> {
    Set(text.split(separator: "\n").filter { $0.hasPrefix("#") }.map { heading in
        String(heading.drop { $0 == "#" }.trimmingCharacters(in: .whitespaces).lowercased()
            .compactMap { $0 == " " ? "-" : ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") ? $0 : nil })
    })
}

/// The `keychainfs ...` command lines a page shows, in indented blocks and in code spans, each
/// up to a comment, a pipe or the `--` that ends its options.
private func keychainfsCommandLines(in text: String) -> [String] {
    let blockLines = text.split(separator: "\n").filter { $0.hasPrefix("    ") }.map { $0.trimmingCharacters(in: .whitespaces) }
    let spans = text.split(separator: "\n").flatMap { backticked(String($0)) }
    return (blockLines + spans).compactMap { line -> String? in
        guard let start = line.range(of: "keychainfs "), line[..<start.lowerBound].allSatisfy({ $0 == " " || $0 == "$" }) || line.hasPrefix("echo")
        else { return nil }
        var command = String(line[start.lowerBound...])
        // What follows a quote is another program's (a --confirm-with command) or a value.
        for end in [" # ", " | ", " && ", " -- ", "; ", "'", "\""] {
            if let cut = command.range(of: end) { command = String(command[..<cut.lowerBound]) }
        }
        return command
    }
}

/// Every Swift file below a directory.
private func swiftFiles(under directory: String) throws -> [String] {
    let enumerator = FileManager.default.enumerator(atPath: directory)
    var files: [String] = []
    while let path = enumerator?.nextObject() as? String {
        if path.hasSuffix(".swift") { files.append(directory + "/" + path) }
    }
    return files
}
