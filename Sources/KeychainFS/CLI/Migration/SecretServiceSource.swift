import DBus
import Keyring
import Support
import VaultCore

/// Another Secret Service as a migration reads it: each collection into the dictionary of its
/// label below `base` (the `default` alias's into `login`, where this project's Secret Service
/// keeps its own), each item read over the bus when it is asked for.
final class SecretServiceSource: IncomingSource {
    let dictionaries: [IncomingDictionary]
    private let client: SecretServiceClient
    private let collections: [SourceCollection]
    private let promptTimeout: Duration

    init(_ client: SecretServiceClient, below base: VaultPath, promptTimeout: Duration) throws(CommandFailure) {
        self.client = client
        self.promptTimeout = promptTimeout
        let collections = try Self.answering { () throws(BusError) in try client.collections(promptTimeout: promptTimeout) }
        self.collections = collections
        dictionaries = try CommandFailure.vault { () throws(VaultError) -> [IncomingDictionary] in
            var dictionaries: [IncomingDictionary] = []
            for collection in collections {
                let fallback = collection.path.split(separator: "/").last.map(String.init) ?? "collection"
                let name = collection.isDefault ? try ItemName("login")
                    : try IncomingDictionary.name(fromLabel: collection.label, fallback: fallback)
                dictionaries.append(IncomingDictionary(path: base.appending(name), label: try collection.label.copy(), count: collection.items.count))
            }
            return dictionaries
        }
    }

    func item(in dictionary: Int, at index: Int, secrets: Bool) throws(CommandFailure) -> IncomingItem {
        let path = collections[dictionary].items[index]
        let item = try Self.answering { () throws(BusError) in try client.item(path, secret: secrets, promptTimeout: promptTimeout) }
        return try CommandFailure.vault { () throws(VaultError) in
            IncomingItem(label: try item.label.copy(), attributes: item.attributes, content: item.content.take(),
                         contentType: item.contentType.take())
        }
    }

    /// The service's failures, as the command's: it is another program's, so unavailable.
    static func answering<R>(_ body: () throws(BusError) -> R) throws(CommandFailure) -> R {
        do {
            return try body()
        } catch where error.name == "org.freedesktop.DBus.Error.ServiceUnknown" {
            throw CommandFailure(message: error.message, status: .notFound)
        } catch {
            throw CommandFailure(message: "the Secret Service: \(error.message)", status: .serviceUnavailable)
        }
    }
}
