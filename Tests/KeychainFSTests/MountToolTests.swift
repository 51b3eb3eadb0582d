import Foundation
import Glibc
import Testing

/// The tools people use on files, driven on the mount as a person would.
@Suite(.tags(.mount, .slow)) struct MountToolTests {
    @Test func vimEditsInPlaceWithSwapAndBackupFiles() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("config"), Array("password=old\nuser=me\n".utf8)) == 0)
        // Ex mode, with a swap file and a backup beside the file, written by rename
        // (backupcopy=no). backupskip is cleared: its default skips everything under /tmp.
        let script = "vim -Nu NONE -es -c 'set swapfile directory=. backup backupdir=. backupskip= backupcopy=no writebackup' " +
            "-c '%s/old/new/' -c 'wq' \(m.path("config"))"
        let result = try sh("cd \(m.mountpoint) && " + script)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(readFile(m.path("config")) == Array("password=new\nuser=me\n".utf8))
        #expect(readFile(m.path("config~")) == Array("password=old\nuser=me\n".utf8))
        // And with backupcopy=yes (in place), the default for files with links.
        let inPlace = try sh("vim -Nu NONE -es -c 'set backupcopy=yes' -c '%s/me/you/' -c 'wq' \(m.path("config"))")
        #expect(inPlace.status == 0, "\(inPlace.stderr)")
        #expect(try m.cli.cli(["get", "config"]).stdoutText == "password=new\nuser=you\n")
        #expect(!listing(m.mountpoint).contains { $0.hasSuffix(".swp") })
    }

    @Test func sedInPlaceAndMove() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("env"), Array("TOKEN=abc\nKEEP=1\n".utf8)) == 0)
        #expect(try sh("sed -i 's/abc/xyz/' \(m.path("env"))").status == 0)
        #expect(readFile(m.path("env")) == Array("TOKEN=xyz\nKEEP=1\n".utf8))
        #expect(try sh("mkdir \(m.path("moved")) && mv \(m.path("env")) \(m.path("moved/env"))").status == 0)
        #expect(try m.cli.cli(["get", "moved/env"]).stdoutText == "TOKEN=xyz\nKEEP=1\n")
    }

    @Test func nanoSavesAFile() throws {
        let m = try MountFixture()
        #expect(writeFile(m.path("note"), Array("first line\n".utf8)) == 0)
        // nano needs a terminal: tmux gives it one; ^O saves, ^X exits.
        let session = "kfs\(getpid())\(Int.random(in: 0..<1_000_000))"
        let script = """
            tmux new-session -d -s \(session) -x 80 -y 24 'nano \(m.path("note"))' && sleep 0.5 &&
            tmux send-keys -t \(session) End ' edited' && tmux send-keys -t \(session) C-o && sleep 0.2 &&
            tmux send-keys -t \(session) Enter && sleep 0.3 && tmux send-keys -t \(session) C-x && sleep 0.3;
            tmux kill-session -t \(session) 2>/dev/null; true
            """
        _ = try sh(script)
        #expect(try m.cli.cli(["get", "note"]).stdoutText == "first line edited\n")
    }

    @Test func copyArchiveAndSyncTreesInAndOut() throws {
        let m = try MountFixture()
        let source = m.cli.directory + "/source"
        let setup = """
            mkdir -p \(source)/a/b && printf 'one' > \(source)/a/one && printf 'two\\n' > \(source)/a/b/two &&
            head -c 4096 /dev/urandom > \(source)/a/b/random && chmod 640 \(source)/a/one &&
            touch -d '2020-01-02 03:04:05' \(source)/a/one
            """
        #expect(try sh(setup).status == 0)
        let copy = try sh("cp -a \(source)/a \(m.path("copied"))")
        #expect(copy.status == 0, "\(copy.stderr)")
        let archive = try sh("tar -C \(source) -cf \(m.cli.directory)/a.tar a && mkdir \(m.path("untarred")) && tar -C \(m.path("untarred")) -xf \(m.cli.directory)/a.tar")
        #expect(archive.status == 0, "\(archive.stderr)")
        let sync = try sh("rsync -a \(source)/a/ \(m.path("synced"))/")
        #expect(sync.status == 0, "\(sync.stderr)")
        for tree in ["copied", "untarred/a", "synced"] {
            let diff = try sh("diff -r \(source)/a \(m.path(tree))")
            #expect(diff.status == 0, "\(tree): \(diff.stdoutText)")
        }
        var st = stat()
        #expect(stat(m.path("copied/one"), &st) == 0 && st.st_mode & 0o777 == 0o640)
        var original = stat()
        #expect(stat(source + "/a/one", &original) == 0 && st.st_mtim.tv_sec == original.st_mtim.tv_sec)
        // A second rsync finds nothing to do, and copying back out gives identical files.
        let again = try sh("rsync -ai \(source)/a/ \(m.path("synced"))/")
        #expect(again.status == 0 && again.stdoutText.isEmpty, "\(again.stdoutText)")
        let out = m.cli.directory + "/out"
        #expect(try sh("cp -a \(m.path("synced")) \(out) && diff -r \(source)/a \(out)").status == 0)
        #expect(try m.cli.cli(["verify"]).exitStatus == .success)
    }
}
