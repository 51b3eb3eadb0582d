import Admission
import CFuse
import CLinux
import Glibc
import VaultCore

/// The table of low-level operations handed to libfuse, in the manner of libfuse's
/// passthrough_hp: each entry unpacks the request, calls FileSystem, and replies. The
/// functions capture nothing; the FileSystem comes from the session's userdata.
enum FUSEOperations {
    static func table() -> fuse_lowlevel_ops {
        var ops = fuse_lowlevel_ops()
        ops.`init` = { userdata, conn in FUSEOperations.initialize(userdata, conn) }
        ops.lookup = { req, parent, name in FUSEOperations.lookup(req, parent, name) }
        ops.forget = { req, ino, count in FUSEOperations.forget(req, ino, count) }
        ops.forget_multi = { req, count, forgets in FUSEOperations.forgetMany(req, count, forgets) }
        ops.getattr = { req, ino, fi in FUSEOperations.getattr(req, ino, fi) }
        ops.setattr = { req, ino, attr, toSet, fi in FUSEOperations.setattr(req, ino, attr, toSet, fi) }
        ops.mknod = { req, parent, name, mode, _ in FUSEOperations.mknod(req, parent, name, mode) }
        ops.symlink = { req, _, _, _ in fuse_reply_err(req, EPERM) }
        ops.link = { req, _, _, _ in fuse_reply_err(req, EPERM) }
        ops.mkdir = { req, parent, name, mode in FUSEOperations.mkdir(req, parent, name, mode) }
        ops.unlink = { req, parent, name in FUSEOperations.unlink(req, parent, name) }
        ops.rmdir = { req, parent, name in FUSEOperations.rmdir(req, parent, name) }
        ops.rename = { req, parent, name, newParent, newName, flags in
            FUSEOperations.rename(req, parent, name, newParent, newName, flags)
        }
        ops.open = { req, ino, fi in FUSEOperations.open(req, ino, fi) }
        ops.create = { req, parent, name, mode, fi in FUSEOperations.create(req, parent, name, mode, fi) }
        ops.read = { req, ino, size, offset, fi in FUSEOperations.read(req, ino, size, offset, fi) }
        ops.write = { req, ino, buf, size, offset, fi in FUSEOperations.write(req, ino, buf, size, offset, fi) }
        ops.flush = { req, _, fi in FUSEOperations.flush(req, fi) }
        ops.fsync = { req, _, _, fi in FUSEOperations.fsync(req, fi) }
        ops.release = { req, _, fi in FUSEOperations.release(req, fi) }
        ops.fallocate = { req, _, mode, offset, length, fi in FUSEOperations.fallocate(req, mode, offset, length, fi) }
        ops.getxattr = { req, ino, name, size in FUSEOperations.getxattr(req, ino, name, size) }
        ops.listxattr = { req, ino, size in FUSEOperations.listxattr(req, ino, size) }
        ops.setxattr = { req, ino, name, value, size, flags in FUSEOperations.setxattr(req, ino, name, value, size, flags) }
        ops.removexattr = { req, ino, name in FUSEOperations.removexattr(req, ino, name) }
        ops.opendir = { req, ino, fi in FUSEOperations.opendir(req, ino, fi) }
        ops.readdir = { req, ino, size, offset, fi in FUSEOperations.readdir(req, ino, size, offset, fi) }
        ops.readdirplus = { req, ino, size, offset, fi in FUSEOperations.readdirplus(req, ino, size, offset, fi) }
        ops.releasedir = { req, _, fi in FUSEOperations.releasedir(req, fi) }
        ops.fsyncdir = { req, _, _, _ in FUSEOperations.fsyncdir(req) }
        ops.statfs = { req, _ in FUSEOperations.statfs(req) }
        ops.access = { req, ino, mask in FUSEOperations.access(req, ino, mask) }
        return ops
    }

    // MARK: plumbing

    private static func fileSystem(_ req: fuse_req_t?) -> FileSystem {
        Unmanaged<FileSystem>.fromOpaque(fuse_req_userdata(req)!).takeUnretainedValue()
    }

    /// Who sent the request, as the kernel tells it.
    private static func caller(_ req: fuse_req_t?) -> RequestContext {
        guard let context = fuse_req_ctx(req)?.pointee else { return .daemon }
        return RequestContext(uid: context.uid, gid: context.gid, pid: context.pid)
    }

    /// Runs `body` with the file system and who asks, replying with the errno of whatever it throws.
    private static func replying(_ req: fuse_req_t?, _ body: (FileSystem, RequestContext) throws(VaultError) -> Void) {
        do throws(VaultError) {
            try body(fileSystem(req), caller(req))
        } catch {
            fuse_reply_err(req, error.errno)
        }
    }

    /// A request handed to the thread that answers it once the user confirmed it.
    private struct AnsweredLater: @unchecked Sendable {
        let req: fuse_req_t?
    }

    /// Serves `body` if the access rules allow each of `checks`; for a `--confirm` rule it hands
    /// the request to the confirmation broker, which serves or refuses it from the thread of the
    /// dialog that answers (no thread per waiting request), so that the session loop goes on
    /// serving everyone else meanwhile. So `body` holds copies of what it needs from the
    /// request: the kernel's buffer is wiped and reused once this returns.
    private static func guarded(_ req: fuse_req_t?, _ checks: [AccessCheck],
                                _ body: @escaping @Sendable (fuse_req_t?, FileSystem, RequestContext) throws(VaultError) -> Void) {
        let fs = fileSystem(req), who = caller(req)
        let later = AnsweredLater(req: req)
        fs.answeringLater.add(1, ordering: .sequentiallyConsistent)
        let admittance = fs.gate.admit(checks, who) { refusal in
            defer { fs.answeringLater.subtract(1, ordering: .sequentiallyConsistent) }
            if let refusal {
                fuse_reply_err(later.req, refusal.errno)
            } else {
                serve(later.req, fs, who, body)
            }
        }
        switch admittance {
        case .asking:
            return
        case .admitted:
            fs.answeringLater.subtract(1, ordering: .sequentiallyConsistent)
            serve(req, fs, who, body)
        case .refused(let error):
            fs.answeringLater.subtract(1, ordering: .sequentiallyConsistent)
            fuse_reply_err(req, error.errno)
        }
    }

    private static func serve(_ req: fuse_req_t?, _ fs: FileSystem, _ who: RequestContext,
                              _ body: (fuse_req_t?, FileSystem, RequestContext) throws(VaultError) -> Void) {
        do throws(VaultError) {
            try body(req, fs, who)
        } catch {
            fuse_reply_err(req, error.errno)
        }
    }

    /// A name from the kernel, validated by the vault's rules.
    private static func name(_ raw: UnsafePointer<CChar>?) throws(VaultError) -> ItemName {
        guard let raw else { throw .invalidName("missing name") }
        // The request buffer it points into is wiped by the session loop once served.
        return try ItemName(bytes: UnsafeRawBufferPointer(start: raw, count: strlen(raw)))
    }

    /// Runs `body` with the request's name as the vault's own copy (the kernel's buffer is
    /// wiped once served), or replies with why it is not a name.
    private static func withName(_ req: fuse_req_t?, _ raw: UnsafePointer<CChar>?, _ body: (ItemName) -> Void) {
        do throws(VaultError) {
            body(try name(raw))
        } catch {
            fuse_reply_err(req, error.errno)
        }
    }

    private static func entry(_ st: stat) -> fuse_entry_param {
        var entry = fuse_entry_param()
        entry.ino = fuse_ino_t(st.st_ino)
        entry.attr = st
        entry.attr_timeout = FileSystem.cacheSeconds
        entry.entry_timeout = FileSystem.cacheSeconds
        return entry
    }

    // MARK: operations

    static func initialize(_ userdata: UnsafeMutableRawPointer?, _ conn: UnsafeMutablePointer<fuse_conn_info>?) {
        guard let conn else { return }
        // Splice would move request data through pipes and unwiped heap copies inside libfuse.
        conn.pointee.want &= ~UInt32(FUSE_CAP_SPLICE_READ | FUSE_CAP_SPLICE_WRITE | FUSE_CAP_SPLICE_MOVE)
        // Every listing carries attributes, not just its first page (the kernel's "auto"): the
        // vault decrypts them to list anyway, and it spares a LOOKUP per entry opened after.
        if conn.pointee.capable & UInt32(FUSE_CAP_READDIRPLUS) != 0 {
            conn.pointee.want |= UInt32(FUSE_CAP_READDIRPLUS)
            conn.pointee.want &= ~UInt32(FUSE_CAP_READDIRPLUS_AUTO)
        }
        // libfuse wants the mount option's value again here (`FUSESession.maximumRead`).
        conn.pointee.max_read = FUSESession.maximumRead
        let fs = Unmanaged<FileSystem>.fromOpaque(userdata!).takeUnretainedValue()
        fs.sessionDidStart()
    }

    static func lookup(_ req: fuse_req_t?, _ parent: fuse_ino_t, _ rawName: UnsafePointer<CChar>?) {
        replying(req) { (fs, caller) throws(VaultError) in
            let validName: ItemName
            do throws(VaultError) {
                validName = try name(rawName)
            } catch .invalidName {
                throw .notFound("")  // a name the vault cannot hold names nothing in it
            }
            var e = entry(try fs.lookup(UInt64(parent), validName, caller))
            fuse_reply_entry(req, &e)
        }
    }

    static func forget(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ count: UInt64) {
        fileSystem(req).forget(UInt64(ino), count: count)
        fuse_reply_none(req)
    }

    static func forgetMany(_ req: fuse_req_t?, _ count: Int, _ forgets: UnsafeMutablePointer<fuse_forget_data>?) {
        let fs = fileSystem(req)
        for index in 0..<count {
            if let item = forgets?[index] { fs.forget(UInt64(item.ino), count: item.nlookup) }
        }
        fuse_reply_none(req)
    }

    static func getattr(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        replying(req) { (fs, caller) throws(VaultError) in
            var st = try fs.attributes(UInt64(ino), handle: fi?.pointee.fh, caller)
            fuse_reply_attr(req, &st, FileSystem.cacheSeconds)
        }
    }

    static func setattr(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ attr: UnsafeMutablePointer<stat>?, _ toSet: Int32,
                        _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        guard let attr else {
            fuse_reply_err(req, EINVAL)
            return
        }
        let handle = fi?.pointee.fh
        let mode = toSet & FUSE_SET_ATTR_MODE != 0 ? attr.pointee.st_mode : nil
        let size = toSet & FUSE_SET_ATTR_SIZE != 0 ? Int(attr.pointee.st_size) : nil
        let modified: Timestamp? = toSet & FUSE_SET_ATTR_MTIME_NOW != 0 ? .now()
            : toSet & FUSE_SET_ATTR_MTIME != 0 ? Timestamp(attr.pointee.st_mtim) : nil
        let accessed: Timestamp? = toSet & FUSE_SET_ATTR_ATIME_NOW != 0 ? .now()
            : toSet & FUSE_SET_ATTR_ATIME != 0 ? Timestamp(attr.pointee.st_atim) : nil
        if let size, size < 0 {
            fuse_reply_err(req, EINVAL)
            return
        }
        guarded(req, [.write(UInt64(ino))]) { (req, fs, caller) throws(VaultError) in
            var st = try fs.setAttributes(UInt64(ino), handle: handle, mode: mode, size: size, modified: modified,
                                          accessed: accessed, caller)
            fuse_reply_attr(req, &st, FileSystem.cacheSeconds)
        }
    }

    /// mknod of a regular file creates an empty item (tar --xattrs creates files this way);
    /// devices, FIFOs and sockets have no place in a vault.
    static func mknod(_ req: fuse_req_t?, _ parent: fuse_ino_t, _ rawName: UnsafePointer<CChar>?, _ mode: mode_t) {
        guard mode & S_IFMT == S_IFREG || mode & S_IFMT == 0 else {
            fuse_reply_err(req, EPERM)
            return
        }
        withName(req, rawName) { itemName in
            guarded(req, [.write(UInt64(parent)), .change(UInt64(parent), itemName)]) { (req, fs, caller) throws(VaultError) in
                var e = entry(try fs.makeItem(UInt64(parent), itemName, mode: mode, caller))
                fuse_reply_entry(req, &e)
            }
        }
    }

    static func mkdir(_ req: fuse_req_t?, _ parent: fuse_ino_t, _ rawName: UnsafePointer<CChar>?, _ mode: mode_t) {
        withName(req, rawName) { itemName in
            guarded(req, [.write(UInt64(parent))]) { (req, fs, caller) throws(VaultError) in
                var e = entry(try fs.makeDirectory(UInt64(parent), itemName, mode: mode, caller))
                fuse_reply_entry(req, &e)
            }
        }
    }

    static func unlink(_ req: fuse_req_t?, _ parent: fuse_ino_t, _ rawName: UnsafePointer<CChar>?) {
        withName(req, rawName) { itemName in
            guarded(req, [.change(UInt64(parent), itemName), .write(UInt64(parent))]) { (req, fs, caller) throws(VaultError) in
                try fs.unlink(UInt64(parent), itemName, caller)
                fuse_reply_err(req, 0)
            }
        }
    }

    static func rmdir(_ req: fuse_req_t?, _ parent: fuse_ino_t, _ rawName: UnsafePointer<CChar>?) {
        withName(req, rawName) { itemName in
            guarded(req, [.change(UInt64(parent), itemName), .write(UInt64(parent))]) { (req, fs, caller) throws(VaultError) in
                try fs.removeDirectory(UInt64(parent), itemName, caller)
                fuse_reply_err(req, 0)
            }
        }
    }

    static func rename(_ req: fuse_req_t?, _ parent: fuse_ino_t, _ rawName: UnsafePointer<CChar>?,
                       _ newParent: fuse_ino_t, _ rawNewName: UnsafePointer<CChar>?, _ flags: UInt32) {
        // RENAME_EXCHANGE and RENAME_WHITEOUT are not supported; RENAME_NOREPLACE is.
        guard flags & ~UInt32(RENAME_NOREPLACE) == 0 else {
            fuse_reply_err(req, EINVAL)
            return
        }
        withName(req, rawName) { source in
            withName(req, rawNewName) { destination in
                // What moves, the dictionary it leaves, the one it enters and what it replaces.
                let checks: [AccessCheck] = [.write(UInt64(parent), source), .write(UInt64(parent)),
                                             .write(UInt64(newParent)), .change(UInt64(newParent), destination)]
                guarded(req, checks) { (req, fs, caller) throws(VaultError) in
                    try fs.rename(UInt64(parent), source, to: UInt64(newParent), destination,
                                  noReplace: flags & UInt32(RENAME_NOREPLACE) != 0, caller)
                    fuse_reply_err(req, 0)
                }
            }
        }
    }

    static func open(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        guard let fi else {
            fuse_reply_err(req, EINVAL)
            return
        }
        let info = FileInfo(fi.pointee)
        guarded(req, [.open(UInt64(ino), flags: info.value.flags)]) { (req, fs, caller) throws(VaultError) in
            var reply = info.value
            reply.fh = try fs.open(UInt64(ino), flags: reply.flags, caller)
            // Direct I/O: plaintext never enters the kernel's page cache.
            reply.direct_io = 1
            reply.keep_cache = 0
            // A reader's close stores nothing, so it need not wait for a FLUSH round trip. Not
            // with O_TRUNC: that open changed the item, and its close is a store like any other.
            if reply.flags & O_ACCMODE == O_RDONLY && reply.flags & O_TRUNC == 0 { reply.noflush = 1 }
            // The caller is gone (an interrupted open): nobody will ever release this handle.
            if fuse_reply_open(req, &reply) != 0 { try? fs.release(reply.fh, caller) }
        }
    }

    static func create(_ req: fuse_req_t?, _ parent: fuse_ino_t, _ rawName: UnsafePointer<CChar>?, _ mode: mode_t,
                       _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        guard let fi else {
            fuse_reply_err(req, EINVAL)
            return
        }
        let info = FileInfo(fi.pointee)
        withName(req, rawName) { itemName in
            guarded(req, [.write(UInt64(parent)), .change(UInt64(parent), itemName)]) { (req, fs, caller) throws(VaultError) in
                var reply = info.value
                let (st, handle) = try fs.create(UInt64(parent), itemName, mode: mode, flags: reply.flags, caller)
                reply.fh = handle
                reply.direct_io = 1
                reply.keep_cache = 0
                var e = entry(st)
                if fuse_reply_create(req, &e, &reply) != 0 { try? fs.release(handle, caller) }
            }
        }
    }

    static func read(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ size: Int, _ offset: off_t, _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        replying(req) { (fs, caller) throws(VaultError) in
            try fs.admitUse(fi!.pointee.fh, .use(UInt64(ino), .read), caller)
            try fs.read(fi!.pointee.fh, offset: Int(offset), size: size, caller) { bytes in
                // Sent with writev straight from the locked buffer; libfuse makes no copy.
                fuse_reply_buf(req, bytes.baseAddress?.assumingMemoryBound(to: CChar.self), bytes.count)
            }
        }
    }

    static func write(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ buf: UnsafePointer<CChar>?, _ size: Int, _ offset: off_t,
                      _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        replying(req) { (fs, caller) throws(VaultError) in
            try fs.admitUse(fi!.pointee.fh, .use(UInt64(ino), .write), caller)
            let written = try fs.write(fi!.pointee.fh, UnsafeRawBufferPointer(start: buf, count: size), offset: Int(offset), caller)
            fuse_reply_write(req, written)
        }
        // The data sits in libfuse's receive buffer; the session loop wipes the whole buffer
        // after every request, this included.
    }

    /// A close that stored is answered by the group commit, once its content is durable.
    static func flush(_ req: fuse_req_t?, _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        replying(req) { (fs, caller) throws(VaultError) in
            let grouped = fs.groupCommit.takesNext
            if try fs.flush(fi!.pointee.fh, caller, durable: !grouped), grouped {
                fs.groupCommit.answerWhenDurable(req)
                return
            }
            fuse_reply_err(req, 0)
        }
    }

    static func fsync(_ req: fuse_req_t?, _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        replying(req) { (fs, caller) throws(VaultError) in
            let grouped = fs.groupCommit.takesNext
            try fs.sync(fi!.pointee.fh, caller, durable: !grouped)
            if grouped {
                fs.groupCommit.answerWhenDurable(req)
                return
            }
            fuse_reply_err(req, 0)
        }
    }

    static func fsyncdir(_ req: fuse_req_t?) {
        replying(req) { (fs, caller) throws(VaultError) in
            try fs.syncDirectory(caller)
            fuse_reply_err(req, 0)
        }
    }

    static func release(_ req: fuse_req_t?, _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        replying(req) { (fs, caller) throws(VaultError) in
            try fs.release(fi!.pointee.fh, caller)
            fuse_reply_err(req, 0)
        }
    }

    /// Mode 0 and FALLOC_FL_KEEP_SIZE; hole punching, collapsing and the rest mean nothing for
    /// an item that is stored whole, and answer EOPNOTSUPP as on filesystems without them.
    static func fallocate(_ req: fuse_req_t?, _ mode: Int32, _ offset: off_t, _ length: off_t,
                          _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        guard mode & ~FALLOC_FL_KEEP_SIZE == 0 else {
            fuse_reply_err(req, EOPNOTSUPP)
            return
        }
        replying(req) { (fs, caller) throws(VaultError) in
            try fs.allocate(fi!.pointee.fh, keepSize: mode & FALLOC_FL_KEEP_SIZE != 0, offset: Int(offset), length: Int(length), caller)
            fuse_reply_err(req, 0)
        }
    }

    // MARK: extended attributes

    /// The raw name the kernel sent.
    private static func rawName(_ raw: UnsafePointer<CChar>?) -> UnsafeRawBufferPointer {
        guard let raw else { return UnsafeRawBufferPointer(start: nil, count: 0) }
        return UnsafeRawBufferPointer(start: raw, count: strlen(raw))
    }

    /// Replies with a value or list: its size when asked for 0 bytes, ERANGE when it does not fit.
    private static func replyXattr(_ req: fuse_req_t?, _ bytes: UnsafeRawBufferPointer, size: Int) {
        if size == 0 {
            fuse_reply_xattr(req, bytes.count)
        } else if bytes.count > size {
            fuse_reply_err(req, ERANGE)
        } else {
            fuse_reply_buf(req, bytes.baseAddress?.assumingMemoryBound(to: CChar.self), bytes.count)
        }
    }

    /// Runs `body` with what the request's attribute name names in the vault (a user attribute,
    /// without `user.`, or a property), or replies: `otherNamespace` for a name of another
    /// namespace (answered without the vault or the rules: security.capability is asked before
    /// every write), or why it is not a name.
    private static func withAttributeName(_ req: fuse_req_t?, _ raw: UnsafePointer<CChar>?, otherNamespace: Int32,
                                          _ body: (ExtendedAttributeName) throws(VaultError) -> Void) {
        do throws(VaultError) {
            guard let name = try ExtendedAttributeName(FUSEOperations.rawName(raw)) else {
                fuse_reply_err(req, otherNamespace)
                return
            }
            try body(name)
        } catch {
            fuse_reply_err(req, error.errno)
        }
    }

    static func getxattr(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ rawName: UnsafePointer<CChar>?, _ size: Int) {
        // Other namespaces hold nothing here.
        withAttributeName(req, rawName, otherNamespace: ENODATA) { name in
            guarded(req, [.read(UInt64(ino))]) { (req, fs, caller) throws(VaultError) in
                try fs.extendedAttribute(UInt64(ino), name, caller) { value in
                    value.withUnsafeBytes { replyXattr(req, $0, size: size) }
                }
            }
        }
    }

    static func listxattr(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ size: Int) {
        guarded(req, [.read(UInt64(ino))]) { (req, fs, caller) throws(VaultError) in
            let list = try fs.extendedAttributeList(UInt64(ino), caller)
            list.withUnsafeBytes { replyXattr(req, $0, size: size) }
        }
    }

    static func setxattr(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ rawName: UnsafePointer<CChar>?, _ value: UnsafePointer<CChar>?,
                         _ size: Int, _ flags: Int32) {
        let mode: AttributeSetMode = flags & Int32(XATTR_CREATE) != 0 ? .create : flags & Int32(XATTR_REPLACE) != 0 ? .replace : .createOrReplace
        // trusted., security. and system. attributes (and ACLs) have no place in a vault.
        withAttributeName(req, rawName, otherNamespace: EOPNOTSUPP) { (name) throws(VaultError) in
            // The value may be served after a confirmation, when the request buffer is gone.
            let copy = try RequestValue(copying: UnsafeRawBufferPointer(start: value, count: size))
            guarded(req, [.write(UInt64(ino))]) { (req, fs, caller) throws(VaultError) in
                try copy.withUnsafeBytes { (bytes) throws(VaultError) in
                    try fs.setExtendedAttribute(UInt64(ino), name, value: bytes, mode: mode, caller)
                }
                fuse_reply_err(req, 0)
            }
        }
    }

    static func removexattr(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ rawName: UnsafePointer<CChar>?) {
        withAttributeName(req, rawName, otherNamespace: EOPNOTSUPP) { name in
            guarded(req, [.write(UInt64(ino))]) { (req, fs, caller) throws(VaultError) in
                try fs.removeExtendedAttribute(UInt64(ino), name, caller)
                fuse_reply_err(req, 0)
            }
        }
    }

    static func opendir(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        guard let fi else {
            fuse_reply_err(req, EINVAL)
            return
        }
        let info = FileInfo(fi.pointee)
        guarded(req, [.list(UInt64(ino))]) { (req, fs, caller) throws(VaultError) in
            var reply = info.value
            reply.fh = try fs.openDirectory(UInt64(ino), caller)
            if fuse_reply_open(req, &reply) != 0 { fs.releaseDirectory(reply.fh) }
        }
    }

    static func readdir(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ size: Int, _ offset: off_t,
                        _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        replyingWithDirectory(req, size) { (fs, caller, pack) throws(VaultError) in
            try fs.directoryEntries(fi!.pointee.fh, inode: UInt64(ino), from: Int(offset), caller) { entry, next in
                var st = entry.direntStat
                return pack(entry.name) { buffer, room, name in
                    fuse_add_direntry(req, buffer, room, name, &st, off_t(next))
                }
            }
        }
    }

    /// Entries with their attributes, so a listing followed by opens or stats (`cat dir/*`,
    /// `ls -l`) costs no LOOKUP per entry.
    static func readdirplus(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ size: Int, _ offset: off_t,
                            _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        replyingWithDirectory(req, size) { (fs, caller, pack) throws(VaultError) in
            try fs.directoryEntriesWithAttributes(fi!.pointee.fh, inode: UInt64(ino), from: Int(offset), caller) { name, attributes, asEntry, next in
                // An entry with inode 0 gives the kernel a name and no dentry, and counts no lookup.
                var e = entry(attributes)
                if !asEntry { e.ino = 0 }
                return pack(name) { buffer, room, cName in
                    fuse_add_direntry_plus(req, buffer, room, cName, &e, off_t(next))
                }
            }
        }
    }

    /// Packs directory entries into locked memory (names are decrypted data too), replies with
    /// it and wipes it. `body` gets `pack(name, add)`: `add` writes one entry with libfuse's
    /// packer at (buffer, room, C name) and returns the size it needs; `pack` says whether it fit.
    private static func replyingWithDirectory(
        _ req: fuse_req_t?, _ size: Int,
        _ body: (FileSystem, RequestContext,
                 _ pack: (DirectoryListing.Entry.Name, (UnsafeMutablePointer<CChar>?, Int, UnsafePointer<CChar>) -> Int) -> Bool)
            throws(VaultError) -> Void
    ) {
        guard var packed = try? SecureBuffer(capacity: size) else {
            fuse_reply_err(req, ENOMEM)
            return
        }
        var failure: Int32 = 0
        packed.withUnsafeMutableStorage { storage in
            var used = 0
            do throws(VaultError) {
                try body(fileSystem(req), caller(req)) { name, add in
                    name.withCString { cName in
                        // Asked first with no room, so an entry that does not fit is never counted.
                        guard add(nil, 0, cName) <= storage.count - used else { return false }
                        used += add(storage.baseAddress!.assumingMemoryBound(to: CChar.self) + used, storage.count - used, cName)
                        return true
                    }
                }
            } catch {
                failure = error.errno
            }
            return used
        }
        if failure != 0 {
            fuse_reply_err(req, failure)
            return
        }
        packed.withUnsafeBytes { bytes in
            _ = fuse_reply_buf(req, bytes.baseAddress?.assumingMemoryBound(to: CChar.self), bytes.count)
        }
    }

    static func releasedir(_ req: fuse_req_t?, _ fi: UnsafeMutablePointer<fuse_file_info>?) {
        fileSystem(req).releaseDirectory(fi!.pointee.fh)
        fuse_reply_err(req, 0)
    }

    static func statfs(_ req: fuse_req_t?) {
        var st = fileSystem(req).statfs()
        fuse_reply_statfs(req, &st)
    }

    static func access(_ req: fuse_req_t?, _ ino: fuse_ino_t, _ mask: Int32) {
        replying(req) { (fs, caller) throws(VaultError) in
            fuse_reply_err(req, try fs.access(UInt64(ino), mask: mask, caller) ? 0 : EACCES)
        }
    }
}
