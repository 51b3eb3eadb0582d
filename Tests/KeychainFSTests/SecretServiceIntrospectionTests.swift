import Foundation
@testable import KeychainFS
import Testing

/// What each object of the Secret Service says it has (its introspection XML) is exactly what
/// it answers: every method it lists refuses a wrong signature with InvalidArgs (so it was
/// found), every method another object lists and this one does not is UnknownMethod, and
/// every property it lists is readable (or refused for a reason other than not existing),
/// writable exactly when it says readwrite, and GetAll gives no other.
@Suite(.serialized) struct SecretServiceIntrospectionTests {
    @Test func everyObjectAnswersExactlyWhatItsIntrospectionLists() throws {
        let s = try SecretServiceFixture()
        let result = try s.python("""
            import xml.etree.ElementTree as ET
            STANDARD = ('org.freedesktop.DBus.Introspectable', 'org.freedesktop.DBus.Properties')
            def name(fn):
                try:
                    fn()
                    return 'ok'
                except dbus.exceptions.DBusException as e:
                    return e.get_dbus_name().split('.')[-1]
            def raw(path, interface, member, signature, arguments):
                return name(lambda: bus.call_blocking(NAME, path, interface, member, signature, arguments))
            def introspect(path):
                return ET.fromstring(bus.call_blocking(NAME, path, STANDARD[0], 'Introspect', '', []))
            collection = default_collection()
            item, _ = iface(collection, 'org.freedesktop.Secret.Collection').CreateItem(props('x', {'k': 'v'}), secret(plain_session(), b'v'), False)
            objects = [ROOT, ROOT + '/collection', ROOT + '/aliases', ROOT + '/session', ROOT + '/prompt',
                       collection, ROOT + '/aliases/default', item, plain_session()]
            # Every method the specification names (an object that answers one it does not list
            # fails here), every one any object lists, and one no object has.
            everyName = {'OpenSession', 'CreateCollection', 'SearchItems', 'Unlock', 'Lock', 'GetSecrets', 'ReadAlias',
                         'SetAlias', 'Delete', 'CreateItem', 'GetSecret', 'SetSecret', 'Close', 'Prompt', 'Dismiss',
                         'Introspect', 'Get', 'GetAll', 'Set', 'Nope'}
            def check(path):
                root = introspect(path)
                interfaces = {i.get('name'): i for i in root.findall('interface')}
                assert set(STANDARD) <= set(interfaces), path
                for method in root.iter('method'):
                    everyName.add(method.get('name'))
                own = [n for n in interfaces if n not in STANDARD]
                if not own:
                    print(path, raw(path, None, 'Nope', '', []), raw(path, 'org.freedesktop.Secret.Service', 'Nope', '', []))
                for interfaceName in own + ['org.freedesktop.DBus.Properties']:
                    listed = {m.get('name') for m in interfaces[interfaceName].findall('method')}
                    for member in sorted(everyName | listed):
                        # 'u' is no method's signature here.
                        got = raw(path, interfaceName, member, 'u', [dbus.UInt32(7)])
                        want = 'InvalidArgs' if member in listed else 'UnknownMethod'
                        if got != want:
                            print('method', path, interfaceName, member, got, 'not', want)
                    properties = {p.get('name'): p.get('access') for p in interfaces[interfaceName].findall('property')}
                    if interfaceName in STANDARD:
                        continue
                    got = set(obj(path).GetAll(interfaceName, dbus_interface=STANDARD[1]).keys())
                    if not got <= set(properties):
                        print('GetAll', path, sorted(got - set(properties)))
                    for prop, access in list(properties.items()) + [('Nope', None)]:
                        read = name(lambda: obj(path).Get(interfaceName, prop, dbus_interface=STANDARD[1]))
                        written = name(lambda: obj(path).Set(interfaceName, prop, dbus.UInt32(1, variant_level=1), dbus_interface=STANDARD[1]))
                        want = {None: ('UnknownProperty', 'UnknownProperty'), 'read': ('ok', 'PropertyReadOnly'), 'readwrite': ('ok', 'InvalidArgs')}[access]
                        if (read, written) != want:
                            print('property', path, interfaceName, prop, read, written, 'not', want)
                print(path[len(ROOT):] or '/', 'checked')
            # Twice: the second round knows every name any object lists.
            for path in objects:
                check(path)
            for path in objects:
                check(path)
            # A prompt: made by an Unlock of the locked vault.
            service.Lock(dbus.Array([], signature='o'))
            unlocked, prompt = service.Unlock(dbus.Array([item], signature='o'))
            check(prompt)
            """)
        #expect(result.status == 0, "\(result.stderr)")
        let round = ["/ checked"] + ["/collection", "/aliases", "/session", "/prompt"].flatMap {
            // A directory has no interface of its own: nothing but the standard ones answers.
            ["/org/freedesktop/secrets\($0) UnknownMethod UnknownMethod", "\($0) checked"]
        } + ["/collection/N", "/aliases/default", "/collection/N/N", "/session/N"].map { "\($0) checked" }
        let expected = round + round + ["/prompt/N checked"]
        let lines = result.stdoutText.split(separator: "\n").map { String($0.replacing(/\/[0-9]+/) { _ in "/N" }) }
        #expect(lines == expected, "\(result.stdoutText)")
    }
}
