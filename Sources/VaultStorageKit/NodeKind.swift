/// What a node is: its row says so in clear (the storage finds items and subtrees by it), and
/// its sealed attributes say so again.
public enum NodeKind: Int64, Sendable {
    case dictionary = 1
    case item = 2
}
