import Foundation
import Glibc
import Testing

/// A vault mounted with `--secret-service` on a private session bus of its own (a real
/// dbus-daemon), and the real clients that talk to it: secret-tool, Python's dbus,
/// secretstorage and keyring. Everything is stopped when the test ends.
final class SecretServiceFixture {
    let bus: PrivateSessionBus
    let cli: CLIFixture
    let mountpoint: String

    /// Mounted with `--extpass` (reading the passphrase file), which also answers unlock prompts.
    init(mountArguments: [String] = [], extpass: ((String) -> String)? = nil) throws {
        bus = try PrivateSessionBus()
        cli = try CLIFixture()
        mountpoint = cli.directory + "/mnt"
        try FileManager.default.createDirectory(atPath: mountpoint, withIntermediateDirectories: true)
        let mounted = try run(keychainfsBinary, ["mount", "--vault", cli.vault, "--extpass", extpass?(cli.passphraseFile) ?? "cat '\(cli.passphraseFile)'",
                                                 "--kdf", "interactive", "--secret-service"] + mountArguments + [mountpoint],
                              environment: bus.environment)
        guard mounted.exitStatus == .success else {
            bus.stop()
            throw FixtureError("mount --secret-service failed (\(mounted.status)): \(mounted.stderr)")
        }
    }

    deinit {
        if isMounted(mountpoint) { _ = try? run(keychainfsBinary, ["unmount", mountpoint]) }
        if isMounted(mountpoint) { _ = try? run("/bin/fusermount3", ["-u", "-z", mountpoint]) }
        bus.stop()
    }

    func path(_ relative: String) -> String { mountpoint + "/" + relative }

    /// A Python client on the bus: `script` runs after a prelude that connects and defines
    /// `service`, `obj(path)`, `iface(path, name)`, `prop(path, interface, name)` and
    /// `error(fn)` (the D-Bus error name fn raised, or "ok").
    func python(_ script: String, environment: [String: String] = [:]) throws -> RunResult {
        try run("/usr/bin/python3", ["-c", SecretServiceFixture.prelude + script],
                environment: bus.environment.merging(environment) { $1 })
    }

    func secretTool(_ arguments: [String], stdin: String? = nil) throws -> RunResult {
        try run("/usr/bin/secret-tool", arguments, stdin: stdin.map { Data($0.utf8) }, environment: bus.environment)
    }

    static let prelude = """
        import dbus, sys, os, json, time
        bus = dbus.SessionBus()
        NAME = 'org.freedesktop.secrets'
        ROOT = '/org/freedesktop/secrets'
        def obj(path): return bus.get_object(NAME, path, introspect=False)
        def iface(path, name): return dbus.Interface(obj(path), name)
        service = iface(ROOT, 'org.freedesktop.Secret.Service')
        def prop(path, interface, name): return obj(path).Get(interface, name, dbus_interface='org.freedesktop.DBus.Properties')
        def error(fn):
            try:
                fn()
                return 'ok'
            except dbus.exceptions.DBusException as e:
                return e.get_dbus_name()
        def plain_session(): return service.OpenSession('plain', dbus.String('', variant_level=1))[1]
        def default_collection(): return service.ReadAlias('default')
        def secret(session, value, content_type='text/plain'):
            return dbus.Struct((dbus.ObjectPath(session), dbus.ByteArray(b''), dbus.ByteArray(value), content_type), signature='oayays')
        def props(label, attributes):
            return dbus.Dictionary({'org.freedesktop.Secret.Item.Label': dbus.String(label, variant_level=1),
                'org.freedesktop.Secret.Item.Attributes': dbus.Dictionary(attributes, signature='ss', variant_level=1)}, signature='sv')

        """
}
