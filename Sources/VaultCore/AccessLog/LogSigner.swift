/// The member who signs the access log batches a vault appends: their name as their slot has
/// it and their key (a version 2 member key, which can sign). Held only while the vault is
/// unlocked by that member; batches appended while locked go unsigned.
struct LogSigner: Sendable {
    let name: [UInt8]
    let key: MemberKey
}
