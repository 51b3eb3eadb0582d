import Foundation
import Testing

/// One `SecretServiceFixture` (bus, vault, mount) for every test of a suite, stopped when the
/// suite ends, and git's libsecret helper built once into its directory.
struct SharedSecretService: SuiteTrait, TestScoping {
    /// The suite's tests run one at a time (`.serialized`), so the fixture is never used from two threads at once.
    final class Shared: @unchecked Sendable {
        let fixture: SecretServiceFixture
        var gitHelper: String?
        init(_ fixture: SecretServiceFixture) { self.fixture = fixture }
    }

    @TaskLocal static var shared: Shared?

    func provideScope(for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void) async throws {
        let shared = Shared(try SecretServiceFixture())
        try await SharedSecretService.$shared.withValue(shared) { try await function() }
    }

    static func fixture() throws -> SecretServiceFixture {
        guard let shared else { throw FixtureError("not within a suite marked SharedSecretService()") }
        return shared.fixture
    }

    /// Built with the flags Debian's libsecret-1-dev gives, into the fixture's own fresh directory:
    /// never a fixed name in a shared temporary directory, which another user could have planted.
    static func gitHelper() throws -> String {
        guard let shared else { throw FixtureError("not within a suite marked SharedSecretService()") }
        if let built = shared.gitHelper { return built }
        let source = "/usr/share/doc/git/contrib/credential/libsecret/git-credential-libsecret.c"
        guard FileManager.default.fileExists(atPath: source) else { throw FixtureError("\(source) is missing: install git") }
        let built = shared.fixture.cli.directory + "/git-credential-libsecret"
        let compiled = try sh("gcc -o '\(built)' '\(source)' $(pkg-config --cflags --libs libsecret-1 glib-2.0)")
        guard compiled.status == 0 else { throw FixtureError("cannot build git-credential-libsecret: \(compiled.stderr)") }
        shared.gitHelper = built
        return built
    }
}
