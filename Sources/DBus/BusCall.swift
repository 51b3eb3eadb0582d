import CSystemd

/// One incoming method call, holding a reference to its message. Reply exactly once, on the
/// loop thread (another thread posts the reply with `connection.post`). A call dropped
/// without a reply is answered org.freedesktop.DBus.Error.Failed "no reply" when it goes, so a
/// client is never left waiting for its timeout.
package final class BusCall: @unchecked Sendable {
    package let path: String
    package let interface: String
    package let member: String
    package let sender: String
    /// The body's D-Bus signature ("" for none).
    package let signature: String
    package let connection: BusConnection
    package private(set) var hasReplied = false
    private let message: OpaquePointer

    /// `message` has been marked sensitive by the caller.
    package init(message: OpaquePointer, connection: BusConnection) {
        self.message = sd_bus_message_ref(message)
        self.connection = connection
        path = BusCall.text(sd_bus_message_get_path(message))
        interface = BusCall.text(sd_bus_message_get_interface(message))
        member = BusCall.text(sd_bus_message_get_member(message))
        sender = BusCall.text(sd_bus_message_get_sender(message))
        signature = BusCall.text(sd_bus_message_get_signature(message, 1))
    }

    deinit {
        let held = HeldMessage(pointer: message)
        let replied = hasReplied
        // sd-bus counts references without atomics: the last one must go on the loop thread.
        connection.onLoopThread {
            if !replied { BusCall.sendError(to: held.pointer, .failed("no reply")) }
            sd_bus_message_unref(held.pointer)
        }
    }

    /// A reader from the start of the body. A secret read wipes its bytes in the message:
    /// read again, a secret `ay` gives zeros and a secret string no longer reads at all.
    package func arguments() -> BusReader {
        sd_bus_message_rewind(message, 1)
        return BusReader(message: message, owner: self)
    }

    /// Builds and sends the reply; an error thrown while building is sent instead.
    package func reply(_ body: (inout BusWriter) throws(BusError) -> Void) {
        beginReply()
        // A caller that said it wants no reply gets none; the daemon would drop it anyway.
        guard sd_bus_message_get_expect_reply(message) > 0 else { return }
        var reply: OpaquePointer?
        let rc = sd_bus_message_new_method_return(message, &reply)
        guard rc >= 0, let reply else { return }
        defer { sd_bus_message_unref(reply) }
        sd_bus_message_sensitive(reply)
        var writer = BusWriter(message: reply)
        do throws(BusError) {
            try body(&writer)
        } catch {
            BusCall.sendError(to: message, error)
            return
        }
        _ = sd_bus_send(nil, reply, nil)
    }

    package func replyError(_ error: BusError) {
        beginReply()
        BusCall.sendError(to: message, error)
    }

    private func beginReply() {
        precondition(!hasReplied, "a D-Bus call answered twice: \(interface).\(member)")
        precondition(connection.isLoopThread, "a D-Bus reply sent off the loop thread")
        hasReplied = true
    }

    /// A peer that has left, or a full queue, makes the send fail; nobody is waiting then.
    private static func sendError(to call: OpaquePointer, _ error: BusError) {
        guard sd_bus_message_get_expect_reply(call) > 0 else { return }
        let error = error.hasValidName ? error : .failed(error.message)
        var reply: OpaquePointer?
        let rc = csystemd_new_method_error(call, &reply, error.name, error.message)
        guard rc >= 0, let reply else { return }
        sd_bus_message_sensitive(reply)
        _ = sd_bus_send(nil, reply, nil)
        sd_bus_message_unref(reply)
    }

    private static func text(_ pointer: UnsafePointer<CChar>?) -> String {
        pointer.map { String(cString: $0) } ?? ""
    }

    /// The message crosses to the loop thread in deinit, where only it touches the pointer.
    private struct HeldMessage: @unchecked Sendable {
        package let pointer: OpaquePointer
    }
}
