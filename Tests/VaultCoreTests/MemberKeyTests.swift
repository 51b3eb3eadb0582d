import Foundation
import Testing
@testable import VaultCore

@Suite struct MemberKeyTests {
    private let kdf = KDFPreset.interactive.parameters

    @Test func aKeyOpensWithItsPassphraseAndShowsItsPublicKeyWithoutOne() throws {
        let scratch = Scratch()
        let path = scratch.directory + "/a/b/member.key"
        let made = try MemberKey.create(at: path, passphrase: secret("member one"), kdf: kdf)
        #expect(try MemberKey.publicKey(at: path) == made)
        let opened = try MemberKey.open(at: path, passphrase: secret("member one"))
        #expect(opened.publicKey == made)
        #expect(MemberPublicKey(base64: made.base64) == made)
        // X25519 then Ed25519: the key signs team log batches, and its X25519 half is its Ed25519 half converted.
        #expect(made.base64.count == 88 && made.signingKey != nil && opened.canSign)
        #expect(MemberPublicKey(bytes: Array(made.bytes.prefix(32))) != nil)
        var other = made.bytes
        other[0] ^= 1
        #expect(MemberPublicKey(bytes: other) == nil, "an X25519 half that is not the Ed25519 half's")

        var info = stat()
        #expect(stat(path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(stat(scratch.directory + "/a/b", &info) == 0 && info.st_mode & 0o777 == 0o700)
        #expect(stat(scratch.directory + "/a", &info) == 0 && info.st_mode & 0o777 == 0o700)
    }

    @Test func aWrongPassphraseIsRefused() throws {
        let path = Scratch().directory + "/member.key"
        try MemberKey.create(at: path, passphrase: secret("member one"), kdf: kdf)
        #expect(throws: VaultError.wrongPassphrase) { try MemberKey.open(at: path, passphrase: secret("member two")) }
    }

    @Test func anExistingFileIsNeverOverwritten() throws {
        let scratch = Scratch()
        let path = scratch.directory + "/member.key"
        let first = try MemberKey.create(at: path, passphrase: secret("member one"), kdf: kdf)
        #expect(throws: VaultError.vaultExists(path)) {
            try MemberKey.create(at: path, passphrase: secret("member two"), kdf: kdf)
        }
        #expect(try MemberKey.publicKey(at: path) == first)
        _ = try MemberKey.open(at: path, passphrase: secret("member one"))
    }

    /// The secret key is bound to its public key: pasting another member's public key into
    /// the file (to be added under it, say) makes the file unopenable.
    @Test func aSwappedPublicKeyFailsToOpen() throws {
        let scratch = Scratch()
        let one = scratch.directory + "/one.key", two = scratch.directory + "/two.key"
        try MemberKey.create(at: one, passphrase: secret("same"), kdf: kdf)
        let other = try MemberKey.create(at: two, passphrase: secret("same"), kdf: kdf)
        var file = try [UInt8](Data(contentsOf: URL(fileURLWithPath: one)))
        let start = 14  // after the magic
        file.replaceSubrange(start ..< start + other.bytes.count, with: other.bytes)
        try Data(file).write(to: URL(fileURLWithPath: one))
        #expect(throws: VaultError.wrongPassphrase) { try MemberKey.open(at: one, passphrase: secret("same")) }
    }

    @Test func aSealedBoxOpensOnlyWithItsMembersKey() throws {
        let scratch = Scratch()
        let one = scratch.directory + "/one.key", two = scratch.directory + "/two.key"
        try MemberKey.create(at: one, passphrase: secret("one"), kdf: kdf)
        try MemberKey.create(at: two, passphrase: secret("two"), kdf: kdf)
        let a = try MemberKey.open(at: one, passphrase: secret("one"))
        let b = try MemberKey.open(at: two, passphrase: secret("two"))
        let message = secret(Array(repeating: 7, count: 32))
        let sealed = message.withUnsafeBytes { a.publicKey.seal($0) }
        var out = try SecureBuffer(capacity: 32)
        #expect(!b.openSealedBox(sealed, count: 32, into: &out))
        #expect(a.openSealedBox(sealed, count: 32, into: &out))
        #expect(out.testBytes == Array(repeating: 7, count: 32))
    }
}
