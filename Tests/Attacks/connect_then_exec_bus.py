"""Connect, then exec, on D-Bus: a child connects to the session bus and execs the admitted
program (which waits on a pipe); this process, which no rule admits, then authenticates on the
shared socket and asks the Secret Service for every item's secret. Usage:
connect_then_exec_bus.py ADMITTED. Prints the secrets it got, or the D-Bus error's name."""
import os, sys
from gi.repository import Gio, GLib
from shared_socket import connect_then_exec

admitted = sys.argv[1]
s, release = connect_then_exec(os.environ["DBUS_SESSION_BUS_ADDRESS"].split("path=", 1)[1].split(",")[0], admitted)
stream = Gio.Socket.new_from_fd(os.dup(s.fileno())).connection_factory_create_connection()
bus = Gio.DBusConnection.new_sync(stream, None, Gio.DBusConnectionFlags.AUTHENTICATION_CLIENT
                                  | Gio.DBusConnectionFlags.MESSAGE_BUS_CONNECTION, None, None)
def call(path, interface, method, arguments, reply):
    return bus.call_sync("org.freedesktop.secrets", path, interface, method, arguments,
                         GLib.VariantType(reply), Gio.DBusCallFlags.NONE, -1, None).unpack()
try:
    session = call("/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "OpenSession",
                   GLib.Variant("(sv)", ("plain", GLib.Variant("s", ""))), "(vo)")[1]
    items = call("/org/freedesktop/secrets/aliases/default", "org.freedesktop.DBus.Properties", "Get",
                 GLib.Variant("(ss)", ("org.freedesktop.Secret.Collection", "Items")), "(v)")[0]
    secrets = call("/org/freedesktop/secrets", "org.freedesktop.Secret.Service", "GetSecrets",
                   GLib.Variant("(aoo)", (items, session)), "(a{o(oayays)})")[0]
    print("items=%d" % len(items))
    for value in secrets.values():
        print(bytes(value[2]).decode())
except GLib.Error as error:
    print("items=%d" % len(items) if "items" in dir() else "", Gio.DBusError.get_remote_error(error))
release()
