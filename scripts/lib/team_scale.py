"""Team vaults at scale, for scripts/bench (bench.py calls run() once, on its own PostgreSQL server).

Three parts:
- fan-out: one vault in PostgreSQL mounted by 1, 10 and 50 daemons on this machine (each its own
  mountpoint and its own member key, as each person of a team would mount it): the time from a
  change written through one more mount (the writer) until every mount reads it, the server's
  client connections meanwhile and the daemons' RSS;
- many vaults: 1 000 vaults in one database, each with a member key of its own and the same 100
  items, against a database holding one such vault alone: `ls -l` and `cat` through a fresh mount
  of one of them, and `keychainfs ls` / `get` through its daemon and opening it with the member key;
- a hot standby of the server: what `keychainfs get` says there.

Member keys and vaults use the `interactive` Argon2id preset so that setting up 1 000 vaults (two
key derivations each, three with the import) takes minutes, not an hour; it does not change what
is measured once a vault is open."""
import concurrent.futures, os, statistics, subprocess, threading, time

ITEMS = 100  # items in each vault of the many-vaults part, in one dictionary


class TeamScale:
    def __init__(self, ctx, mounts, vaults, changes):
        self.ctx, self.mounts, self.vaults, self.changes = ctx, mounts, vaults, changes
        self.fanout = {}  # mounts -> dict of figures
        self.many = {}  # database label -> {measure: [seconds]}
        self.setup = {}  # what setting up took, seconds
        self.standby = None  # what a command against a hot standby of the server said

    # Helpers over the bench's own.

    def uri(self, database, name):
        return "postgresql:///%s?host=%s&user=postgres#%s" % (database, self.ctx.socket, name)

    def member_key(self, name):
        key = os.path.join(self.ctx.work, "team-keys", name + ".key")
        os.makedirs(os.path.dirname(key), exist_ok=True)
        self.ctx.sh([self.ctx.KFS, "member", "init", "--member-key", key, "--passphrase-file", self.ctx.PW, "--kdf", "interactive"])
        return key

    def public_key(self, key):
        return self.ctx.sh([self.ctx.KFS, "member", "show", "--member-key", key]).stdout.strip().splitlines()[-1]

    def mount(self, vault, key, mountpoint):
        os.makedirs(mountpoint, exist_ok=True)
        self.ctx.sh([self.ctx.KFS, "mount", "--vault", vault, "--member-key", key, "--passphrase-file", self.ctx.PW, mountpoint])
        self.ctx.mounted.append(mountpoint)

    def unmount(self, mountpoint):
        self.ctx.sh([self.ctx.KFS, "unmount", mountpoint])
        self.ctx.mounted.remove(mountpoint)

    def client_connections(self):
        """Client sessions on the server but the psql asking: (all, those whose last statement
        was a LISTEN, i.e. sessions that only listen)."""
        row = self.ctx.psql(self.ctx.socket, "SELECT count(*), count(*) FILTER (WHERE query LIKE 'LISTEN%') FROM pg_stat_activity "
                                             "WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")
        total, listening = row.split("|")
        return int(total), int(listening)

    # Fan-out.

    def fan_out(self):
        ctx = self.ctx
        vault = self.uri("bench", "team")
        ctx.sh([ctx.KFS, "init", "--vault", vault, "--passphrase-file", ctx.PW, "--kdf", "interactive"])
        largest = max(self.mounts)
        start = time.perf_counter()
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            keys = list(pool.map(self.member_key, ["fan%d" % k for k in range(largest + 1)]))
        for k, key in enumerate(keys):
            ctx.sh([ctx.KFS, "member", "add", "--vault", vault, "--passphrase-file", ctx.PW, self.public_key(key), "--name", "fan%d" % k])
        self.setup["fan-out members"] = time.perf_counter() - start
        # The writer: one more mount, as another machine of the team, not counted among the N.
        writer = os.path.join(ctx.work, "team-writer")
        self.mount(vault, keys[largest], writer)
        os.makedirs(os.path.join(writer, "shared"))
        points = []
        baseline = self.client_connections()[0]  # the writer and the bench's other mounts still up
        try:
            for n in sorted(self.mounts):
                start, before = time.perf_counter(), len(points)
                while len(points) < n:
                    mp = os.path.join(ctx.work, "team-fan%d" % len(points))
                    self.mount(vault, keys[len(points)], mp)
                    points.append(mp)
                mounting = time.perf_counter() - start
                self.fanout[n] = self.measure_fan_out(writer, points, baseline)
                self.fanout[n]["mount each"] = mounting / (n - before)
        finally:
            for mp in reversed(points):
                self.unmount(mp)
            self.unmount(writer)

    def measure_fan_out(self, writer, points, baseline):
        ctx = self.ctx
        idle_total, idle_listening = self.client_connections()
        idle_listening -= 1  # the writer's listener
        seen_max = [idle_total]
        done = threading.Event()

        def sample():  # the most connections while changes fan out
            while not done.wait(0.2):
                seen_max[0] = max(seen_max[0], self.client_connections()[0])
        sampler = threading.Thread(target=sample)
        sampler.start()
        to_all, to_each = [], []
        try:
            for i in range(self.changes):
                value = "team change %d of %d mounts\n" % (i, len(points))
                path = os.path.join("shared", "item%d" % (i % 3))
                with open(os.path.join(writer, path), "w") as f:
                    f.write(value)
                start = time.perf_counter()
                deadline = start + 30
                waiting = list(points)
                while waiting:
                    still = []
                    for mp in waiting:
                        try:
                            with open(os.path.join(mp, path)) as f:
                                if f.read() == value:
                                    to_each.append(time.perf_counter() - start)
                                    continue
                        except FileNotFoundError:
                            pass
                        still.append(mp)
                    waiting = still
                    if waiting and time.perf_counter() > deadline:
                        raise RuntimeError("a change through one mount did not reach %d of %d mounts within 30 s" % (len(waiting), len(points)))
                    if waiting:
                        time.sleep(0.001)
                to_all.append(time.perf_counter() - start)
        finally:
            done.set()
            sampler.join()
        rss = sum(ctx.rss_mib(ctx.daemon_pid(mp)) for mp in points)
        return {"to all median": statistics.median(to_all), "to all max": max(to_all),
                "to each median": statistics.median(to_each),
                "connections": idle_total - baseline, "listening": idle_listening, "connections max": seen_max[0] - baseline,
                "rss total": rss}

    # Many vaults in one database.

    def make_vault(self, database, name, items_dir):
        ctx = self.ctx
        key = self.member_key("%s-%s" % (database, name))
        vault = self.uri(database, name)
        ctx.sh([ctx.KFS, "init", "--vault", vault, "--member-key", key, "--passphrase-file", ctx.PW, "--name", "owner-" + name])
        ctx.sh([ctx.KFS, "import", "dir", "--vault", vault, "--member-key", key, "--passphrase-file", ctx.PW, "--into", "team", items_dir])
        return vault, key

    def many_vaults(self):
        ctx = self.ctx
        items_dir = os.path.join(ctx.work, "team-items")
        os.makedirs(items_dir)
        for i in range(ITEMS):
            with open(os.path.join(items_dir, "s%d" % i), "w") as f:
                f.write("%063d\n" % i)
        databases = {"one": 1, "many": self.vaults}
        targets = {}
        for database, count in databases.items():
            ctx.sh([os.path.join(ctx.POSTGRES_BIN, "createdb"), "-h", ctx.socket, "-U", "postgres", database])
            start = time.perf_counter()
            names = ["v%04d" % k for k in range(count)]
            # Two at a time: the machine's two cores, each Argon2id taking one.
            with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
                made = list(pool.map(lambda name: self.make_vault(database, name, items_dir), names))
            self.setup["%d vaults" % count] = time.perf_counter() - start
            targets[database] = made[count // 2]
        self.target = targets["many"]
        self.rows_in_many = self.table_rows("many")
        for run in range(ctx.runs):
            for database, (vault, key) in targets.items():
                self.time_one_vault(database, vault, key)

    def table_rows(self, database):
        out = subprocess.run([os.path.join(self.ctx.POSTGRES_BIN, "psql"), "-h", self.ctx.socket, "-U", "postgres", "-d", database, "-AtX", "-c",
                              "SELECT pg_database_size(current_database()), (SELECT count(*) FROM vaults)"],
                             capture_output=True, text=True, check=True).stdout.strip()
        size, count = out.split("|")
        return int(size), int(count)

    def time_one_vault(self, database, vault, key):
        ctx = self.ctx
        record = lambda label, seconds: self.many.setdefault(database, {}).setdefault(label, []).append(seconds)
        mp = os.path.join(ctx.work, "team-one-of-many")
        self.mount(vault, key, mp)
        try:
            d = os.path.join(mp, "team")
            # The first listing and reads after mounting reach the server; the second, the daemon's cache.
            record("ls -l, first after mounting", ctx.timed("ls -l %s > /dev/null" % d))
            record("cat of 100 items, first after mounting", ctx.timed("cat %s/* > /dev/null" % d))
            record("ls -l again", ctx.timed("ls -l %s > /dev/null" % d))
            record("cat of 100 items again", ctx.timed("cat %s/* > /dev/null" % d))
            record("keychainfs ls team (through the daemon)", ctx.timed([ctx.KFS, "ls", "--vault", vault, "team"]))
            record("keychainfs get team/s42 (through the daemon)", ctx.timed([ctx.KFS, "get", "--vault", vault, "team/s42"]))
        finally:
            self.unmount(mp)
        # Opening the vault itself: connect, unseal the member key (one Argon2id), read.
        record("keychainfs ls team --member-key (opens the vault)",
               ctx.timed([ctx.KFS, "ls", "--vault", vault, "--member-key", key, "--passphrase-file", ctx.PW, "team"]))
        record("keychainfs get team/s42 --member-key (opens the vault)",
               ctx.timed([ctx.KFS, "get", "--vault", vault, "--member-key", key, "--passphrase-file", ctx.PW, "team/s42"]))

    # A read replica.

    def hot_standby(self):
        """A hot standby of the bench's server (pg_basebackup -R, streaming): what `keychainfs get`
        of an item of the many-vaults database says there. Every open LISTENs on the vault's
        channel, which a standby refuses."""
        ctx = self.ctx
        import tempfile
        directory = tempfile.mkdtemp(prefix="keychainfs-bench-standby.")
        ctx.postgres_directories.append(directory)
        socket = os.path.join(directory, "socket")
        os.makedirs(socket)
        as_server = []
        if os.getuid() == 0:  # as start_postgres: the server refuses root
            import pwd
            user = pwd.getpwnam("postgres")
            for path in (directory, socket):
                os.chown(path, user.pw_uid, user.pw_gid)
            as_server = ["setpriv", "--reuid", "postgres", "--regid", "postgres", "--init-groups", "--"]
        data = os.path.join(directory, "data")
        ctx.sh(as_server + [os.path.join(ctx.POSTGRES_BIN, "pg_basebackup"), "-h", ctx.socket, "-U", "postgres", "-D", data, "-R", "-X", "stream"])
        log = open(os.path.join(directory, "server.log"), "wb")
        server = ctx.start_daemon(as_server + [os.path.join(ctx.POSTGRES_BIN, "postgres"), "-D", data, "-k", socket, "-c", "listen_addresses=",
                                               "-c", "max_connections=250"], stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 60
            while subprocess.run([os.path.join(ctx.POSTGRES_BIN, "pg_isready"), "-q", "-h", socket]).returncode != 0:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the standby did not start: " + open(os.path.join(directory, "server.log")).read()[-300:])
                time.sleep(0.05)
            vault, key = self.target
            on_standby = vault.replace("host=" + ctx.socket, "host=" + socket)
            done = subprocess.run([ctx.KFS, "get", "--vault", on_standby, "--member-key", key, "--passphrase-file", ctx.PW, "team/s42"],
                                  capture_output=True, text=True)
            self.standby = (done.returncode, done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.stdout.strip())
        finally:
            ctx.stop_daemon(server)

    # Report.

    def lines(self):
        out = []
        if self.fanout:
            out += ["", "Team vault fan-out: one vault in PostgreSQL (the bench's server, Unix socket) mounted by N daemons on this "
                    "machine, each with a member key of its own; a change written through one more mount (the writer, as another "
                    "machine), every mount's file read until it holds it (%d changes per row). Connections: the server's client "
                    "sessions the N mounts add (the writer's left out); RSS: the N daemons'." % self.changes, "",
                    "| mounts | change seen by every mount, median | slowest | one mount, median | connections | of them only listening "
                    "| connections at most during the changes | daemons' RSS, total | mount each |",
                    "| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
            for n, figures in sorted(self.fanout.items()):
                out.append("| %d | %.1f ms | %.1f ms | %.1f ms | %d | %d | %d | %.0f MiB | %.2f s |" % (
                    n, figures["to all median"] * 1e3, figures["to all max"] * 1e3, figures["to each median"] * 1e3,
                    figures["connections"], figures["listening"], figures["connections max"], figures["rss total"], figures["mount each"]))
        if self.many:
            size, count = self.rows_in_many
            out += ["", "%d vaults in one database (each its own member key and %d items; the database %.0f MiB) against a database "
                    "holding one such vault: seconds, medians of %d runs, a fresh mount each run." % (count, ITEMS, size / (1 << 20), self.ctx.runs), "",
                    "| one vault of them | in a database of %d vaults | in a database of 1 | many / one |" % count,
                    "| --- | ---: | ---: | ---: |"]
            for label in self.many["many"]:
                many, one = statistics.median(self.many["many"][label]), statistics.median(self.many["one"][label])
                out.append("| %s | %.4f | %.4f | %.2f |" % (label, many, one, many / one))
            out += ["", "Setting up: " + "; ".join("%s %.0f s" % item for item in self.setup.items()) + " (`interactive` Argon2id)."]
        if self.standby:
            out += ["", "A hot standby of the server (pg_basebackup -R, streaming): `keychainfs get` of one of those items there: exit status "
                    "%d, `%s`." % self.standby]
        return out

    def csv_rows(self):
        rows = []
        for n, figures in sorted(self.fanout.items()):
            for label, value in figures.items():
                if value is not None:
                    rows.append(("team vault %d mounts %s" % (n, label), value))
        for database, measures in self.many.items():
            for label, seconds in measures.items():
                rows.append(("team vault in a database of %s: %s, s" % (self.rows_in_many[1] if database == "many" else 1, label),
                             statistics.median(seconds)))
        if self.standby:
            rows.append(("team vault on a hot standby: keychainfs get exit status", self.standby[0]))
        return rows


def run(ctx, mounts, vaults, changes):
    scale = TeamScale(ctx, mounts, vaults, changes)
    scale.fan_out()
    scale.many_vaults()
    scale.hot_standby()
    return scale
