@testable import DBus
import Foundation
import Synchronization
import Testing

/// The declaration machinery on its own, on a private bus: one declared object, whose
/// dispatch, signature check, Properties and introspection all come from its declaration.
@Suite struct BusObjectDeclarationTests {
    /// A counter with a method, a read-only and a writable property, and a signal.
    final class Counter: Sendable {
        let value = Mutex<UInt32>(0)
        let label = Mutex("counter")
    }

    static let declaration = BusObjectDeclaration<Counter>(called: "a counter", interfaces: [
        BusInterface("org.example.Counter", methods: [
            BusMethod("Add", in: [("amount", "u")], out: [("total", "u")]) { (counter, call) throws(BusError) in
                var reader = call.arguments()
                let amount = try reader.uint32()
                let total = counter.value.withLock { $0 += amount; return $0 }
                call.reply { (writer) throws(BusError) in try writer.uint32(total) }
            },
        ], properties: [
            BusProperty("Value", "u") { (counter) throws(BusError) in
                let value = counter.value.withLock { $0 }
                return { (writer) throws(BusError) in try writer.uint32(value) }
            },
            BusProperty("Label", "s", read: { (counter) throws(BusError) in
                let label = counter.label.withLock { $0 }
                return { (writer) throws(BusError) in try writer.string(label) }
            }, write: { (counter, reader) throws(BusError) in
                let label = try reader.string()
                return { (call) throws(BusError) in
                    counter.label.withLock { $0 = label }
                    call.reply { _ in }
                }
            }),
            BusProperty("Secret", "s") { (_) throws(BusError) in throw .accessDenied("not for you") },
        ], signals: [BusSignal("Changed", [("total", "u")])]),
    ])

    @Test func dispatchSignaturesPropertiesAndIntrospectionComeFromTheDeclaration() throws {
        let counter = Counter()
        let missing = BusLoopFixture.prefix + "/missing"
        let fixture = try BusLoopFixture { call in
            do throws(BusError) {
                try BusObjectDeclarationTests.declaration.dispatch(call, children: { ["child"] }) { () throws(BusError) in
                    guard call.path != missing else { throw .unknownObject(call.path) }
                    return counter
                }
            } catch {
                call.replyError(error)
            }
        }
        fixture.start()
        let lines = try fixture.python("""
            import xml.etree.ElementTree as ET
            def anyCall(path, interface, member, signature, arguments):
                try:
                    return bus.call_blocking(sys.argv[1], path, interface, member, signature, arguments)
                except dbus.exceptions.DBusException as e:
                    return e.get_dbus_name().split('.')[-1]
            P = '/org/example/Test'
            C = 'org.example.Counter'
            PROPS = 'org.freedesktop.DBus.Properties'
            print(anyCall(P, C, 'Add', 'u', [dbus.UInt32(2)]), anyCall(P, None, 'Add', 'u', [dbus.UInt32(3)]))
            print(anyCall(P, C, 'Add', 's', ['x']), anyCall(P, C, 'Nope', '', []), anyCall(P, 'org.example.Other', 'Add', 'u', [dbus.UInt32(1)]))
            print(anyCall(P + '/missing', C, 'Add', 'u', [dbus.UInt32(1)]), anyCall(P + '/missing', PROPS, 'GetAll', 's', ['']))
            print(anyCall(P, 'org.freedesktop.DBus.Introspectable', 'Introspect', 'u', [dbus.UInt32(1)]), anyCall(P, PROPS, 'Nope', '', []))
            print(anyCall(P, PROPS, 'Get', 'ss', [C, 'Value']), anyCall(P, PROPS, 'Get', 'ss', [C, 'Secret']), anyCall(P, PROPS, 'Get', 'ss', [C, 'Nope']))
            print(sorted(anyCall(P, PROPS, 'GetAll', 's', [C]).items()), anyCall(P, PROPS, 'GetAll', 's', ['org.example.Other']))
            print(anyCall(P, PROPS, 'Set', 'ssv', [C, 'Label', dbus.String('renamed', variant_level=1)]), anyCall(P, PROPS, 'Get', 'ss', [C, 'Label']))
            print(anyCall(P, PROPS, 'Set', 'ssv', [C, 'Value', dbus.UInt32(1, variant_level=1)]),
                  anyCall(P, PROPS, 'Set', 'ssv', [C, 'Label', dbus.UInt32(1, variant_level=1)]), anyCall(P, PROPS, 'Get', 's', [C]))
            xml = anyCall(P, 'org.freedesktop.DBus.Introspectable', 'Introspect', '', [])
            root = ET.fromstring(xml)
            for interface in root.findall('interface'):
                print(interface.get('name'), [(m.get('name'), ''.join(a.get('type') for a in m.findall('arg') if a.get('direction') == 'in'))
                    for m in interface.findall('method')], [(p.get('name'), p.get('type'), p.get('access')) for p in interface.findall('property')],
                    [s.get('name') for s in interface.findall('signal')])
            print([n.get('name') for n in root.findall('node')])
            """)
        #expect(lines == [
            "2 5",
            "InvalidArgs UnknownMethod UnknownMethod",
            "UnknownObject UnknownObject",
            "UnknownMethod UnknownMethod",
            "5 AccessDenied UnknownProperty",
            "[(dbus.String('Label'), dbus.String('counter', variant_level=1)), (dbus.String('Value'), dbus.UInt32(5, variant_level=1))] dbus.Dictionary({}, signature=dbus.Signature('sv'))",
            "None renamed",
            "PropertyReadOnly InvalidArgs InvalidArgs",
            "org.freedesktop.DBus.Introspectable [('Introspect', '')] [] []",
            "org.freedesktop.DBus.Properties [('Get', 'ss'), ('GetAll', 's'), ('Set', 'ssv')] [] ['PropertiesChanged']",
            "org.example.Counter [('Add', 'u')] [('Value', 'u', 'read'), ('Label', 's', 'readwrite'), ('Secret', 's', 'read')] ['Changed']",
            "['child']",
        ], "\(lines)")
    }
}
