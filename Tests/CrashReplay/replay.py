#!/usr/bin/env python3
"""Issue 25: every crash point of a recorded vcache run, replayed (ALICE / CrashMonkey style).

    replay.py --log LOG --root RECORDED_DIR --snapshot INITIAL_DIR --vcache BIN --origin ORIGIN_ROOT
              [--old-origin DIR] --list URLS --work DIR [--states N] [--seed S] [--control [data|all]]
              [--model ext4|posix] [--keep-failed K] [-v]

LOG (and LOG.bin, the bytes) come from recorder.c run on vcache with VCACHE_RECORD_DIR=RECORDED_DIR;
INITIAL_DIR is a copy of RECORDED_DIR taken before the run (missing: the run started from nothing).
From the log, crash states are built: one at each fsync/fdatasync boundary (a sync returned; the
state holds until the next one returns, so it is taken with every call made by then) and one before
the first, with every write not made durable dropped; within the budget of N states, variants
where those writes are kept in random subsets and one is torn at 512-byte sectors, the namespace
changes still pending kept as a random prefix, and a stale catalog.db-shm of random bytes.
Each state is written out as a directory and checked with vcache (below). Prints one summary line:

    LABEL: S states (B crash points, V variants), F failed (by kind); D damaged catalogs repaired (seed N)

--model posix (a check of what vcache assumes, expected to fail): a folder's entries are durable only
once that folder was fsynced, in no order; a file's size once the file was.

The durability model (Docs/reliability.md, "Every crash point, replayed"):
- A file's data: a write is durable once an fsync or fdatasync of the same file that BEGAN after
  the write returned has ENDED. Until then it may be lost, kept, or (the torn variants) half-written
  in 512-byte sectors, each write independently of the others.
- The namespace and sizes (create, mkdir, rename, unlink, rmdir, ftruncate, fallocate) reach the
  disk in the order they were made (ext4's journal commits them in order): a state keeps a prefix
  of them. An fsync/fdatasync of a file makes that prefix reach at least the file's own last
  namespace or size change before the sync began (its creation, a rename onto it, a truncation:
  the journal transaction holding it is committed, and every earlier one); an fsync of a folder
  (SQLite's, after making its journal) makes every earlier change durable. Nothing else is
  assumed: not data=ordered (another file's data is not written with a commit), not that an
  fsync commits changes made after the file's own.
- catalog.db-shm (SQLite's WAL index, changed through mmap, which no recorder sees) is never
  durable: no state has it (or, in half the variants, a stale one of random bytes), and SQLite
  rebuilds it from the WAL.
--control ignores vcache's own fsyncs of `data` (SQLite's still count): what a vcache that forgot
that fsync would leave. --control all ignores every fsync (nothing is durable but what the run
started with: at each crash point the namespace as the run left it and no write, then random
subsets). Either must find failures, or the harness could not see a missing fsync.

Checks on each state (VCACHE_DIR=state):
1. `vcache ls --json --ranges` exits 0, or 5 naming a damaged catalog, which `verify --fix` must
   then repair (after it, ls exits 0, and checks 2 to 5 hold as for any state);
2. every byte range the catalog claims equals the origin's bytes (with --old-origin: all of an
   entry's ranges equal one version's bytes, the current or the former, never a mix);
3. every video the run reported `done` and complete (a --json event on stdout) before the crash
   point is complete; every entry reported `evicted` before it (and not fetched again since)
   holds no claim;
4. `vcache verify` exits 0;
5. a resume (`vcache prefetch -i URLS`) exits 0, claims only the origin's bytes, and leaves every
   video complete with the origin's SHA-256.
"""
import argparse
import collections
import hashlib
import json
import mmap
import os
import random
import shutil
import subprocess
import sys

SECTOR = 512


class Op:
    __slots__ = ("seq", "pid", "kind", "a")

    def __init__(self, seq, pid, kind, *a):
        self.seq, self.pid, self.kind, self.a = seq, pid, kind, a


def is_shm(path):
    return path.endswith("-shm")


def load(log_path, root, snapshot):
    """The run as a list of ops on inodes (numbered here), and the initial files.

    kinds: meta ('mkdir', path) ('create', path, ino) ('unlink', path) ('rmdir', path)
           ('rename', src, dst) ('trunc', ino, length) ('falloc', ino, mode, off, len)
           ('clobber', path) -- a rename from outside the folder: unknown bytes
           write (ino, off, length, bin_off); sync_begin / sync_end (target, token, ok)
           stdout (bin_off, length)
    """
    names = {}      # path -> ino, or 'dir'
    initial = {}    # ino -> path in the snapshot (bytes read when a state is made)
    next_ino = [0]

    def new_ino():
        next_ino[0] += 1
        return next_ino[0]

    if snapshot and os.path.isdir(snapshot):
        names[root] = "dir"
        for d, dirs, files in os.walk(snapshot):
            rel = os.path.relpath(d, snapshot)
            base = root if rel == "." else root + "/" + rel
            names[base] = "dir"
            for f in files:
                if is_shm(f):
                    continue
                ino = new_ino()
                names[base + "/" + f] = ino
                initial[ino] = os.path.join(d, f)

    initial_names = dict(names)
    ops = []
    fds = {}        # (pid, fd) -> ino or ('dir', path)
    begins = {}     # (pid, tid, fd) -> the begin op's seq

    def meta(seq, pid, *a):
        ops.append(Op(seq, pid, "meta", *a))

    with open(log_path) as f:
        for line in f:
            p = line.rstrip("\n").split("\t")
            if len(p) < 4:
                continue
            seq, pid, tid, op, args = int(p[0]), int(p[1]), int(p[2]), p[3], p[4:]
            if op == "open":
                fd, flags, created, path = int(args[0]), int(args[1]), args[2] == "1", args[3]
                if is_shm(path):
                    continue  # never durable (see above): its writes are not replayed
                cur = names.get(path)
                if cur == "dir" or flags & os.O_DIRECTORY:
                    fds[(pid, fd)] = ("dir", path)
                    continue
                if cur is None or created:
                    ino = new_ino()
                    names[path] = ino
                    meta(seq, pid, "create", path, ino)
                else:
                    ino = cur
                    if flags & os.O_TRUNC and flags & (os.O_WRONLY | os.O_RDWR):
                        meta(seq, pid, "trunc", ino, 0)
                fds[(pid, fd)] = ino
            elif op == "close":
                fds.pop((pid, int(args[0])), None)
            elif op in ("write", "pwrite", "pwrite64", "writev", "pwritev", "pwritev64", "pwritev2"):
                target = fds.get((pid, int(args[0])))
                if isinstance(target, int):
                    ops.append(Op(seq, pid, "write", target, int(args[1]), int(args[2]), int(args[3])))
            elif op == "stdout":
                ops.append(Op(seq, pid, "stdout", int(args[0]), int(args[1])))
            elif op in ("fsync_begin", "fdatasync_begin"):
                target = fds.get((pid, int(args[0])))
                begins[(pid, tid, int(args[0]))] = seq
                ops.append(Op(seq, pid, "sync_begin", target))
            elif op in ("fsync_end", "fdatasync_end"):
                target = fds.get((pid, int(args[0])))
                b = begins.pop((pid, tid, int(args[0])), None)
                if b is not None:
                    ops.append(Op(seq, pid, "sync_end", target, b, args[1] == "0"))
            elif op == "sync_begin":
                begins[(pid, tid, "all")] = seq
            elif op == "sync_end":
                b = begins.pop((pid, tid, "all"), None)
                if b is not None:
                    ops.append(Op(seq, pid, "sync_end", "all", b, args[0] == "0"))
            elif op in ("ftruncate",):
                target = fds.get((pid, int(args[0])))
                if isinstance(target, int):
                    meta(seq, pid, "trunc", target, int(args[1]))
            elif op == "truncate":
                target = names.get(args[1])
                if isinstance(target, int):
                    meta(seq, pid, "trunc", target, int(args[0]))
            elif op == "fallocate":
                target = fds.get((pid, int(args[0])))
                if isinstance(target, int):
                    meta(seq, pid, "falloc", target, int(args[1]), int(args[2]), int(args[3]))
            elif op == "mkdir":
                names[args[0]] = "dir"
                meta(seq, pid, "mkdir", args[0])
            elif op == "rmdir":
                names.pop(args[0], None)
                meta(seq, pid, "rmdir", args[0])
            elif op == "unlink":
                names.pop(args[0], None)
                meta(seq, pid, "unlink", args[0])
            elif op == "rename":
                src, dst = args[1], args[2]
                if src == "-":
                    names[dst] = new_ino()
                    meta(seq, pid, "clobber", dst)
                elif dst == "-":
                    names.pop(src, None)
                    meta(seq, pid, "unlink", src)
                else:
                    moved = names.pop(src, None)
                    if moved == "dir":
                        for k in [k for k in names if k.startswith(src + "/")]:
                            names[dst + k[len(src):]] = names.pop(k)
                    names[dst] = moved
                    meta(seq, pid, "rename", src, dst)
            elif op == "link":
                if args[1] != "-" and args[2] != "-":
                    raise SystemExit("replay.py: hard links inside the folder are not modelled")
            # sync_file_range only starts writeback: it makes nothing durable.
    data_inos = {v for k, v in initial_names.items() if isinstance(v, int) and k.endswith("/data")}
    data_inos |= {o.a[2] for o in ops if o.kind == "meta" and o.a[0] == "create" and o.a[1].endswith("/data")}
    return ops, initial, initial_names, data_inos


def concerns(op, ino, names_at):
    """Whether meta op `op` changes inode `ino` (its creation, a rename onto it, its size)."""
    a = op.a
    if a[0] == "create":
        return a[2] == ino
    if a[0] in ("trunc", "falloc"):
        return a[1] == ino
    if a[0] == "rename":
        return names_at.get(op.seq) == ino
    return False


def windows(points, count, nothing):
    """The crash points: each boundary's durability holds until the next sync returns, so its
    state is taken at the last moment before that (every call made by then, the unsynced ones
    pending: the most a crash there can lose or keep, and the most vcache can have said); one more
    before the first sync returns (nothing durable yet). (index of the last op in the window,
    durable namespace changes, {ino: sync begin seq})"""
    ends = [i for i, _, _ in points]
    out = [((ends[0] if ends else count) - 1, nothing, {})]
    for k, (i, dm, synced) in enumerate(points):
        out.append(((ends[k + 1] - 1) if k + 1 < len(ends) else count - 1, dm, synced))
    return [p for p in out if p[0] >= 0]


def parents(op):
    """The folders whose fsync makes namespace change `op` durable under the POSIX model."""
    a = op.a
    if a[0] in ("mkdir", "create", "unlink", "rmdir", "clobber"):
        return {os.path.dirname(a[1])}
    if a[0] == "rename":
        return {os.path.dirname(a[1]), os.path.dirname(a[2])}
    return set()


def crash_points(ops, control, model="ext4", data_inos=frozenset()):
    """Each crash point: (index into ops, the durable namespace changes, {ino: sync begin seq}).
    The durable changes are a prefix (the seq of its last) under the ext4 model, a set of seqs
    under the POSIX one."""
    if model == "posix" and not control:
        return posix_points(ops)
    # The inode a rename moves, and each meta op's position, for the "its own last change" rule.
    names = {}
    rename_ino = {}
    for o in ops:
        if o.kind != "meta":
            continue
        a = o.a
        if a[0] == "create":
            names[a[1]] = a[2]
        elif a[0] == "rename":
            rename_ino[o.seq] = names.get(a[1])
            names[a[2]] = names.pop(a[1], None)
        elif a[0] == "unlink":
            names.pop(a[1], None)
    last_meta = {}          # ino -> seq of its last meta op so far
    metas_seen = []         # seqs of meta ops so far
    durable_meta = 0
    synced = {}             # ino -> the latest begin seq of a sync of it that ended
    points = []
    for i, o in enumerate(ops):
        if o.kind == "meta":
            metas_seen.append(o.seq)
            for ino in ([o.a[2]] if o.a[0] == "create" else [o.a[1]] if o.a[0] in ("trunc", "falloc")
                        else [rename_ino.get(o.seq)] if o.a[0] == "rename" else []):
                if ino is not None:
                    last_meta.setdefault(ino, []).append(o.seq)
        elif o.kind == "sync_end":
            target, begin, ok = o.a
            if not ok:
                continue
            ignored = control == "all" or (control == "data" and target in data_inos)
            if not ignored:
                if target == "all" or (isinstance(target, tuple) and target[0] == "dir"):
                    bound = max([s for s in metas_seen if s < begin], default=0)
                    if target == "all":
                        for ino in list(synced) + list(last_meta):
                            synced[ino] = max(synced.get(ino, 0), begin)
                        synced["all"] = begin
                elif isinstance(target, int):
                    bound = max([s for s in last_meta.get(target, []) if s < begin], default=0)
                    synced[target] = max(synced.get(target, 0), begin)
                else:
                    bound = 0
                durable_meta = max(durable_meta, bound)
            points.append((i, durable_meta, dict(synced)))
    return windows(points, len(ops), 0)


def posix_points(ops):
    """POSIX alone: a change to a folder's entries (create, mkdir, rename, unlink, rmdir) is durable
    once an fsync of that folder (of both, for a rename) that began after it has ended; a file's
    size change (ftruncate, fallocate) once an fsync of the file has. No order between them."""
    durable = set()
    satisfied = {}          # meta seq -> the parents synced since
    metas = []
    synced = {}
    points = []
    for i, o in enumerate(ops):
        if o.kind == "meta":
            metas.append(o)
        elif o.kind == "sync_end":
            target, begin, ok = o.a
            if not ok:
                continue
            if isinstance(target, tuple) and target[0] == "dir":
                for m in metas:
                    if m.seq < begin and target[1] in parents(m):
                        got = satisfied.setdefault(m.seq, set())
                        got.add(target[1])
                        if got >= parents(m):
                            durable.add(m.seq)
            elif isinstance(target, int):
                synced[target] = max(synced.get(target, 0), begin)
                for m in metas:
                    if m.seq < begin and m.a[0] in ("trunc", "falloc") and m.a[1] == target:
                        durable.add(m.seq)
            points.append((i, frozenset(durable), dict(synced)))
    return windows(points, len(ops), frozenset())


def build_state(ops, initial, initial_names, blob, root, upto, durable_meta, synced, variant, rng, out_dir,
                control=False):
    """Writes the state after ops[0..upto] as `variant` leaves it ('base', 'subset', 'torn') to out_dir.
    Returns a one-line description of what was kept."""
    window = ops[:upto + 1]
    prefix = isinstance(durable_meta, int)

    def durable_change(o):
        return o.seq <= durable_meta if prefix else o.seq in durable_meta

    pending_meta = [o for o in window if o.kind == "meta" and not durable_change(o)]
    all_synced = synced.get("all", 0)

    def durable_write(o):
        return o.seq < max(synced.get(o.a[0], 0), all_synced)

    pending_writes = [o for o in window if o.kind == "write" and not durable_write(o)]
    kept_meta = set()
    kept_writes = set()
    torn = None
    if control == "all" and variant == "base":
        # The control's plain state: the journal committed every namespace change (as ext4 does
        # every 5 s), no data was written back (the fsyncs did nothing).
        kept_meta = {o.seq for o in pending_meta}
    if variant in ("subset", "torn"):
        if prefix:  # the journal: a prefix of the changes still pending
            kept_meta = {o.seq for o in pending_meta[:rng.randint(0, len(pending_meta))]}
        else:
            kept_meta = {o.seq for o in pending_meta if rng.random() < 0.5}
        kept_writes = {o.seq for o in pending_writes if rng.random() < 0.5}
        if variant == "torn":
            multi = [o for o in pending_writes if o.a[2] > SECTOR]
            if multi:
                # The last write of several sectors (of some file: pick among the last few).
                torn = rng.choice(multi[-3:])
                kept_writes.discard(torn.seq)
    names = dict(initial_names) or {root: "dir"}
    content = {}
    for ino, path in initial.items():
        with open(path, "rb") as f:
            content[ino] = bytearray(f.read())
    for o in window:
        if o.kind == "meta":
            if not durable_change(o) and o.seq not in kept_meta:
                continue
            a = o.a
            if a[0] == "mkdir":
                names[a[1]] = "dir"
            elif a[0] == "create":
                names[a[1]] = a[2]
                content[a[2]] = bytearray()
            elif a[0] in ("unlink", "rmdir"):
                names.pop(a[1], None)
            elif a[0] == "rename":
                moved = names.pop(a[1], None)
                if moved == "dir":
                    for k in [k for k in names if k.startswith(a[1] + "/")]:
                        names[a[2] + k[len(a[1]):]] = names.pop(k)
                if moved is not None:
                    names[a[2]] = moved
            elif a[0] == "clobber":
                names.pop(a[1], None)
            elif a[0] == "trunc":
                c = content.setdefault(a[1], bytearray())
                if a[2] < len(c):
                    del c[a[2]:]
                else:
                    c.extend(bytes(a[2] - len(c)))
            elif a[0] == "falloc":
                ino, mode, off, length = a[1:]
                c = content.setdefault(ino, bytearray())
                if mode & 0x02:  # FALLOC_FL_PUNCH_HOLE
                    end = min(off + length, len(c))
                    if end > off:
                        c[off:end] = bytes(end - off)
                elif not mode & 0x01 and off + length > len(c):  # not KEEP_SIZE
                    c.extend(bytes(off + length - len(c)))
        elif o.kind == "write":
            ino, off, length, at = o.a
            if ino not in content:
                continue  # its file never reached the disk in this state
            if durable_write(o) or o.seq in kept_writes:
                pieces = [(off, at, length)]
            elif torn is not None and o.seq == torn.seq:
                pieces = []
                s = off
                while s < off + length:
                    e = min(off + length, (s // SECTOR + 1) * SECTOR)
                    if rng.random() < 0.5:
                        pieces.append((s, at + (s - off), e - s))
                    s = e
                c = content[ino]
                if off + length > len(c):  # the size reached the disk, not all the sectors
                    c.extend(bytes(off + length - len(c)))
            else:
                continue
            c = content[ino]
            for p_off, p_at, p_len in pieces:
                if p_off > len(c):
                    c.extend(bytes(p_off - len(c)))
                c[p_off:p_off + p_len] = blob[p_at:p_at + p_len]
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    for path in sorted(names, key=lambda p: p.count("/")):
        if path != root and not path.startswith(root + "/"):
            continue
        rel = path[len(root):].lstrip("/")
        target = os.path.join(out_dir, rel) if rel else out_dir
        parent = os.path.dirname(target)
        if not os.path.isdir(parent):
            continue  # its folder did not reach the disk: neither did it
        if names[path] == "dir":
            os.makedirs(target, mode=0o700, exist_ok=True)
        elif not is_shm(path):
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            c = content.get(names[path], b"")
            # Sparse, as vcache leaves `data`: runs of zeros are not written.
            view = memoryview(c)
            step = 1 << 16
            zero = bytes(step)
            for s in range(0, len(c), step):
                chunk = view[s:s + step]
                if chunk != zero[:len(chunk)]:
                    os.pwrite(fd, chunk, s)
            os.ftruncate(fd, len(c))
            os.close(fd)
    # A crash leaves the WAL index as the mmap left it: in half the variants, a stale one of random
    # bytes (SQLite must rebuild it from the WAL, not trust it).
    stale_shm = variant != "base" and os.path.exists(os.path.join(out_dir, "catalog.db")) and rng.random() < 0.5
    if stale_shm:
        with open(os.path.join(out_dir, "catalog.db-shm"), "wb") as f:
            f.write(rng.randbytes(32768))
    return "%s: %d pending writes, %d kept%s; %d pending namespace changes, %d kept%s" % (
        variant, len(pending_writes), len(kept_writes), ", 1 torn" if torn else "",
        len(pending_meta), len(kept_meta), "; a stale -shm" if stale_shm else "")


def said_before(ops, blob, upto):
    """The --json events vcache printed before the crash point: (complete urls, evicted urls)."""
    text = b""
    complete, evicted = set(), set()
    for o in ops[:upto + 1]:
        if o.kind != "stdout":
            continue
        at, n = o.a
        text += blob[at:at + n]
        while b"\n" in text:
            line, text = text.split(b"\n", 1)
            try:
                e = json.loads(line)
            except ValueError:
                continue
            if e.get("event") == "done" and e.get("complete"):
                complete.add(e["url"])
                evicted.discard(e["url"])
            elif e.get("event") == "start":
                evicted.discard(e.get("url"))  # fetched again from here on
            elif e.get("event") == "evicted":
                evicted.add(e["url"])
                complete.discard(e["url"])
    return complete, evicted


class Checker:
    def __init__(self, vcache, origin, urls_file, old_origin=None):
        self.vcache, self.origin, self.urls_file = vcache, origin, urls_file
        self.urls = [u.strip() for u in open(urls_file) if u.strip()]
        self.bytes = {}
        self.sha = {}
        self.damaged = 0  # states whose catalog SQLite found damaged (exit 5, then verify --fix)
        for u in self.urls:
            with open(os.path.join(origin, u.rsplit("/", 1)[1]), "rb") as f:
                self.bytes[u] = f.read()
            self.sha[u] = hashlib.sha256(self.bytes[u]).hexdigest()
        # The versions the origin served before (a workload that changes videos at the origin).
        self.old = {}
        for u in self.urls if old_origin else []:
            old = os.path.join(old_origin, u.rsplit("/", 1)[1])
            if os.path.exists(old):
                with open(old, "rb") as f:
                    self.old[u] = [f.read()]

    def run(self, state, *args):
        env = dict(os.environ, VCACHE_DIR=state)
        env.pop("LD_PRELOAD", None)
        r = subprocess.run([self.vcache, *args], env=env, capture_output=True, timeout=120)
        return r.returncode, r.stdout.decode(errors="replace"), r.stderr.decode(errors="replace")

    def entries(self, state):
        if not os.path.exists(os.path.join(state, "catalog.db")):
            return 0, {}  # no catalog reached the disk: no cache yet, nothing claimed
        rc, out, err = self.run(state, "ls", "--json", "--ranges")
        if rc != 0:
            return rc, err.strip().splitlines()[-1:] or [out[-200:]]
        found = {}
        for line in out.splitlines():
            e = json.loads(line)
            if e.get("event") == "entry":
                found[e["url"]] = e
        return 0, found

    def claims(self, state, found, current_only=False):
        """None when every entry's claimed ranges are all the bytes of one version of its video
        (the origin's now, or, with --old-origin, the one it had before: never a mix)."""
        for url, e in found.items():
            if url not in self.bytes:
                return "an entry for a URL never fetched: %s" % url
            path = os.path.join(state, "entries", e["key"][:2], e["key"], "data")
            try:
                with open(path, "rb") as f:
                    have = f.read()
            except OSError as x:
                if e["ranges"]:
                    return "%s: claims %s but has no data (%s)" % (url, e["ranges"], x.strerror)
                continue
            versions = [self.bytes[url]] + ([] if current_only else self.old.get(url, []))
            wrong = None
            for origin in versions:
                wrong = next(((a, b) for a, b in e["ranges"] if have[a:b + 1] != origin[a:b + 1]), None)
                if wrong is None:
                    break
            if wrong is not None:
                return "%s: claimed bytes %d-%d differ from the origin's%s" % (
                    url, wrong[0], wrong[1], "" if len(versions) == 1 else " (of every version)")
        return None

    def check(self, state, said_complete, said_evicted):
        """None when the state holds every promise; else what broke."""
        self.note = None
        rc, found = self.entries(state)
        fixed = False
        if rc == 5:
            self.damaged += 1
            why = found
            self.note = "damaged catalog (%s), repaired by verify --fix" % why
            rc2, out, err = self.run(state, "verify", "--fix")
            if rc2 not in (0, 1):
                return "ls exit 5 (%s), then verify --fix exit %d: %s" % (why, rc2, err.strip()[-200:])
            fixed = True
            rc, found = self.entries(state)
        if rc != 0:
            return "ls exit %d after%s: %s" % (rc, " verify --fix" if fixed else "", found)
        problem = self.claims(state, found)
        if problem:
            return problem
        # (A damaged catalog may be set aside by verify --fix, but not lose what vcache had said:
        # every commit it spoke of was durable.)
        after = " (after verify --fix set a damaged catalog aside)" if fixed else ""
        for url in sorted(said_complete):
            if found.get(url, {}).get("state") != "complete":
                return "reported complete before the crash point, not complete after it%s: %s" % (after, url)
        for url in sorted(said_evicted):
            if found.get(url, {}).get("ranges"):
                return "reported evicted before the crash point, still claimed after it%s: %s" % (after, url)
        # (No catalog reached the disk: there is no cache to verify; the resume makes one.)
        if os.path.exists(os.path.join(state, "catalog.db")):
            rc, out, err = self.run(state, "verify")
            if rc != 0:
                return "verify exit %d: %s" % (rc, (out + err).strip()[-300:])
        rc, out, err = self.run(state, "prefetch", "-q", "-i", self.urls_file, "-j", "4")
        if rc != 0:
            return "the resume exit %d: %s" % (rc, err.strip()[-300:])
        rc, found = self.entries(state)
        if rc != 0:
            return "ls after the resume exit %d: %s" % (rc, found)
        problem = self.claims(state, found, current_only=True)
        if problem:
            return "after the resume: " + problem
        for url in self.urls:
            e = found.get(url)
            if not e or e.get("state") != "complete" or e.get("sha256") != self.sha[url]:
                return "after the resume %s is not complete with the origin's SHA-256" % url
        return None


def kind_of(problem):
    """A failure's kind, for the summary."""
    for words, kind in (("after the resume", "resume"), ("the resume", "resume"), ("claimed bytes", "false claim"),
                        ("but has no data", "claim without data"), ("reported complete", "lost completion"),
                        ("reported evicted", "evicted came back"), ("verify", "verify"), ("ls ", "catalog")):
        if words in problem:
            return kind
    return "other"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--log", required=True)
    ap.add_argument("--root", required=True, help="the folder the recorder watched")
    ap.add_argument("--snapshot", default="", help="a copy of it before the run")
    ap.add_argument("--vcache", required=True)
    ap.add_argument("--origin", required=True, help="the origin's files")
    ap.add_argument("--old-origin", default=None, help="the videos as the origin served them before they changed")
    ap.add_argument("--list", required=True, help="the URLs (a resume fetches them)")
    ap.add_argument("--work", required=True)
    ap.add_argument("--states", type=int, default=200)
    ap.add_argument("--every-boundary", action="store_true",
                    help="replay every fsync boundary as it stands even past --states (the variants get what is left of it)")
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--control", nargs="?", const="data", choices=("data", "all"), default=None,
                    help="data: vcache's fsyncs of data do nothing; all: no fsync does anything")
    ap.add_argument("--model", choices=("ext4", "posix"), default="ext4",
                    help="posix: a folder's entries are durable only once the folder was fsynced")
    ap.add_argument("--keep-failed", type=int, default=3,
                    help="keep this many failed (or damaged) states, as built, in WORK/failed-N")
    ap.add_argument("--label", default="crash replay")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()

    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    root = args.root.rstrip("/")
    ops, initial, initial_names, data_inos = load(args.log, root, args.snapshot)
    with open(args.log + ".bin", "rb") as f:
        blob = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if os.fstat(f.fileno()).st_size else b""
    points = crash_points(ops, args.control, args.model, data_inos)
    boundaries = len(points)

    # Every boundary as it stands (pending writes dropped).
    plan = []
    if len(points) <= args.states or args.every_boundary:
        plan = [(p, "base") for p in points]
    else:
        # Over the budget: two thirds of it on an even spread of the boundaries (the last one
        # included), a third left for the variants.
        bases = max(1, args.states * 2 // 3)
        step = len(points) / bases
        plan = [(points[int(k * step)], "base") for k in range(bases - 1)] + [(points[-1], "base")]
    # Then random subsets and torn writes, at boundaries where something is pending.
    extra = max(0, args.states - len(plan))
    for k in range(extra):
        plan.append((rng.choice(points), "subset" if k % 2 == 0 else "torn"))

    checker = Checker(args.vcache, args.origin, args.list, args.old_origin)
    os.makedirs(args.work, exist_ok=True)
    failures = 0
    kinds = collections.Counter()
    kept = 0
    variants = 0
    for n, ((upto, durable_meta, synced), variant) in enumerate(plan):
        state = os.path.join(args.work, "state")
        saved = rng.getstate()
        desc = build_state(ops, initial, initial_names, blob, root, upto, durable_meta, synced, variant, rng, state, args.control)
        variants += variant != "base"
        complete, evicted = said_before(ops, blob, upto)
        problem = checker.check(state, complete, evicted)
        if args.verbose:
            print("state %d (ops to %d of %d, seq %d) %s: %s" % (n, upto, len(ops), ops[upto].seq, desc, problem or checker.note or "ok"))
        if problem:
            failures += 1
            kinds[kind_of(problem)] += 1
            if failures <= 5 and not args.verbose:
                print("state %d (seq %d, %s): %s" % (n, ops[upto].seq, desc, problem))
        elif checker.note and not args.control and not args.verbose and checker.damaged <= 5:
            print("state %d (seq %d, %s): %s" % (n, ops[upto].seq, desc, checker.note))
        if (problem or checker.note) and kept < args.keep_failed:
            # The state as it was before vcache ran on it: built again from the same draws.
            again = random.Random()
            again.setstate(saved)
            build_state(ops, initial, initial_names, blob, root, upto, durable_meta, synced, variant, again,
                        os.path.join(args.work, "%s-%d" % ("failed" if problem else "damaged", n)), args.control)
            kept += 1
        shutil.rmtree(state, ignore_errors=True)
    detail = " (%s)" % ", ".join("%s: %d" % kv for kv in sorted(kinds.items())) if kinds else ""
    replayed = len(set(p[0] for (p, variant) in plan if variant == "base"))  # a boundary by its op index
    coverage = "every one replayed" if replayed == boundaries else "%d replayed as they stand" % replayed
    print("%s: %d states (%d crash points: %s; %d variants), %d failed%s; %d damaged catalogs repaired (seed %d)" % (
        args.label, len(plan), boundaries, coverage, variants, failures, detail, checker.damaged, seed))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
