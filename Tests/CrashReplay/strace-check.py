#!/usr/bin/env python3
"""Does the recorder see every call vcache makes to change its cache? (issue 25: "first confirm
with strace that the recorder sees every call vcache makes to write")

    strace-check.py LOG CACHE TRACE...

each TRACE (one a process: vcache does not fork): `strace -f -qq -y -o TRACE -e trace=%file,write,pwrite64,writev,pwritev,pwritev2,fsync,
fdatasync,sync_file_range,ftruncate,fallocate,close` of the same run the recorder logged to LOG
(both at once: one run). Counts, per kind, the syscalls on paths under CACHE that change something
(opens, writes, syncs, sizes, the namespace, closes) and the recorder's lines; prints both and
exits 1 when any kind differs. A call made by a path the recorder does not wrap (a glibc-internal
open, a raw syscall) would show here as a missing count.
"""
import re
import sys
from collections import Counter

log, cache, traces = sys.argv[1], sys.argv[2].rstrip("/"), sys.argv[3:]

KIND = {
    "open": "open", "openat": "open", "creat": "open",
    "write": "write", "pwrite64": "write", "writev": "write", "pwritev": "write", "pwritev2": "write",
    "fsync": "fsync", "fdatasync": "fdatasync", "sync_file_range": "sync_file_range",
    "ftruncate": "ftruncate", "truncate": "ftruncate", "fallocate": "fallocate",
    "mkdir": "mkdir", "mkdirat": "mkdir", "rmdir": "rmdir", "unlink": "unlink", "unlinkat": "unlink",
    "rename": "rename", "renameat": "rename", "renameat2": "rename", "link": "link", "linkat": "link",
    "close": "close",
}
# Calls the recorder logs whatever their result (the others: only when they succeed).
ALWAYS = {"fsync", "fdatasync", "close", "sync_file_range"}

under = lambda p: p == cache or p.startswith(cache + "/")
seen = Counter()
pending = {}
listings = set()   # (trace, fd) of opendir's descriptors (threads share them: not by pid)
listed = 0
line_re = re.compile(r"^(\d+)\s+(.*)$")
lines = ((t, raw) for t in traces for raw in open(t, errors="replace"))
for trace, raw in lines:
    m = line_re.match(raw.rstrip("\n"))
    if not m:
        continue
    pid, text = m.group(1), m.group(2)
    if text.endswith("<unfinished ...>"):
        pending[pid] = text[: -len("<unfinished ...>")]
        continue
    r = re.match(r"^<\.\.\. (\w+) resumed>(.*)$", text)
    if r:
        text = pending.pop(pid, r.group(1) + "(") + r.group(2)
    call = re.match(r"^(\w+)\((.*)\)\s+=\s+(-?\d+)(<([^>]*)>)?", text)
    if not call:
        continue
    name, args, ret, ret_path = call.group(1), call.group(2), int(call.group(3)), call.group(5)
    kind = KIND.get(name)
    if kind is None:
        continue
    ok = ret >= 0 if kind not in ("write",) else ret > 0
    if kind not in ALWAYS and not ok:
        continue
    if kind == "open":
        hit = ret_path is not None and under(ret_path)
        # opendir(3) opens inside glibc (O_DIRECTORY|O_NONBLOCK), where no LD_PRELOAD reaches, and
        # closedir closes the same way: a read-only listing that changes nothing. Counted apart;
        # an fsync of such a descriptor would still be counted below (and missed by the recorder).
        if hit and "O_DIRECTORY" in args and "O_NONBLOCK" in args and "O_RDONLY" in args:
            listings.add((trace, ret))
            listed += 1
            continue
    elif kind == "close" and (trace, int(re.match(r"^-?\d+", args).group(0))) in listings:
        listings.discard((trace, int(re.match(r"^-?\d+", args).group(0))))
        continue
    elif kind in ("mkdir", "rmdir", "unlink", "rename", "link") or name == "truncate":
        hit = any(under(s) for s in re.findall(r'"([^"]*)"', args))
    else:
        fd = re.match(r"^-?\d+<([^>]*)>", args)
        hit = fd is not None and under(fd.group(1))
    if hit:
        seen[kind] += 1

recorded = Counter()
RECORDED = {"open": "open", "close": "close", "fsync_begin": "fsync", "fdatasync_begin": "fdatasync",
            "sync_file_range": "sync_file_range", "ftruncate": "ftruncate", "truncate": "ftruncate",
            "fallocate": "fallocate", "mkdir": "mkdir", "rmdir": "rmdir", "unlink": "unlink",
            "rename": "rename", "link": "link"}
for line in open(log):
    p = line.rstrip("\n").split("\t")
    if len(p) < 4:
        continue
    op = p[3]
    if op in ("write", "pwrite", "pwrite64", "writev", "pwritev", "pwritev64", "pwritev2"):
        recorded["write"] += 1
    elif op in RECORDED:
        recorded[RECORDED[op]] += 1

bad = 0
print("%-16s %8s %8s" % ("call", "strace", "recorder"))
for kind in sorted(set(seen) | set(recorded)):
    mark = "" if seen[kind] == recorded[kind] else "   <- differs"
    bad += bool(mark)
    print("%-16s %8d %8d%s" % (kind, seen[kind], recorded[kind], mark))
print("strace check: %d calls seen by strace on the cache, %d recorded, %d kinds differ "
      "(and %d read-only folder listings by opendir, inside glibc)" % (
    sum(seen.values()), sum(recorded.values()), bad, listed))
sys.exit(1 if bad else 0)
