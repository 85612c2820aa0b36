#!/usr/bin/env bash
# make powercut CYCLES=N: power cuts on a real file system. An ext4 image on a loop device
# (data=writeback,commit=1: under the default data=ordered even a build without fsync survives
# most cuts, and the test would prove little), vcache prefetching into it from a local nginx, and
# at a random moment the file system is shut down as a power cut would (FS_IOC_GOINGDOWN with no
# log flush, as xfstests does), vcache killed, the image remounted. Then every byte the catalog
# claims must equal the origin's, `vcache verify` must pass, and a resume must end byte-exact.
# The cycles take turns at four workloads: a list with -j 4; the videos one `prefetch URL` at a
# time; a list with -j 8 while an `evict --lru --max-size` and `verify --fix` loop runs beside it;
# and `serve` with three players (curl) reading every video through it.
#
#   powercut.sh VCACHE CYCLES [--control]
#
# Also: every video the run reported complete (its `done` events, written outside the image) must
# still be complete after the cut.
# --control runs the same cycles under eatmydata (fsync does nothing): that must FAIL (lost or
# false claims, an unreadable catalog), which shows the harness sees a missing fsync.
# Needs root, a loop device, mkfs.ext4, nginx and python3; where one is absent it says
# "skipped: ..." and exits 2 (a skip is never a pass). Whatever fails once it runs (nginx does not
# start, mkfs or the mount fails, a cycle leaves no cache to check) is a failure, exit 1.
# Exit 0: every cycle held (or, with --control, some cycle failed); 1 otherwise.
set -uo pipefail
bin=${1:?usage: powercut.sh VCACHE CYCLES [--control]}
cycles=${2:-20}
control=${3:-}
here=$(cd "$(dirname "$0")" && pwd)

skip() { echo "skipped: $1"; exit 2; }
fail() { echo "powercut: $1"; exit 1; }
[ "$(id -u)" = 0 ] || skip "power cuts need root (a loop device and mount)"
for t in losetup mkfs.ext4 python3 mount umount curl; do command -v $t >/dev/null || skip "$t is missing"; done
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || skip "nginx is missing"
[ -e /dev/loop-control ] || skip "no /dev/loop-control (the loop module is not loaded)"
if [ "$control" = --control ]; then command -v eatmydata >/dev/null || skip "eatmydata is missing (apt-get install eatmydata)"; fi

work=$(mktemp -d "${TMPDIR:-/tmp}/vcache-powercut-XXXXXX")
mnt="$work/mnt"; root="$work/root"; mkdir -p "$mnt" "$root"
cleanup() {
  [ -n "${pid:-}" ] && kill -9 -- "-$pid" 2>/dev/null
  mountpoint -q "$mnt" && umount -l "$mnt"
  # SIGKILL: a parent that blocks SIGTERM (a test runner) passes the mask on to nginx.
  [ -n "${ORIGIN_PID:-}" ] && kill -9 "$ORIGIN_PID" 2>/dev/null && wait "$ORIGIN_PID" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
. "$here/nginx-origin.sh"
# The origin's videos: random bytes (a claim of a wrong byte cannot go unseen), 2 to 6 MiB.
for i in 1 2 3 4 5 6; do head -c $(( (i + 1) << 20 )) /dev/urandom > "$root/v$i.bin"; done
start_origin "$work/nginx" "$root" >/dev/null || fail "nginx did not start: $(tail -3 "$work/nginx/error.log" 2>/dev/null)"
list="$work/urls.txt"
for i in 1 2 3 4 5 6; do echo "http://127.0.0.1:$ORIGIN_PORT/v$i.bin"; done > "$list"

truncate -s 96M "$work/img"
mkfs.ext4 -q -F "$work/img" || fail "mkfs.ext4 failed"
mount -o loop,data=writeback,commit=1 "$work/img" "$mnt" || fail "cannot mount the ext4 image on a loop device"
umount "$mnt"

run=("$bin")
[ "$control" = --control ] && run=(eatmydata "$bin")

# Every claim against the origin: each range the catalog claims, byte for byte.
check_claims() {
  local listed
  listed=$(VCACHE_DIR="$mnt/cache" "$bin" ls --json --ranges 2>"$work/ls.err") || { echo "ls failed: $(head -3 "$work/ls.err")"; return 1; }
  echo "$listed" | python3 -c '
import json, sys, hashlib
cache, root = sys.argv[1], sys.argv[2]
bad = 0
for line in sys.stdin:
    o = json.loads(line)
    if o.get("event") != "entry": continue
    name = o["url"].rsplit("/", 1)[1]
    data = "%s/entries/%s/%s/data" % (cache, o["key"][:2], o["key"])
    with open(root + "/" + name, "rb") as f: origin = f.read()
    try:
        with open(data, "rb") as f: have = f.read()
    except OSError as e:
        if o["ranges"]: print("claims %s but no data: %s" % (name, e)); bad += 1
        continue
    for a, b in o["ranges"]:
        if have[a:b + 1] != origin[a:b + 1]:
            print("%s: claimed bytes %d-%d differ from the origin" % (name, a, b)); bad += 1
            break
sys.exit(1 if bad else 0)
' "$mnt/cache" "$root"
}

# Every video the run reported complete before the cut is still complete after it, unless an
# evict reported it evicted after that, or an evict was under way at the cut: evict reports what
# it removed when it is done, so one cut midway has removed entries it never named. Such an entry
# may be gone, never partial (evict takes whole entries).
check_said() {
  local listed
  listed=$(VCACHE_DIR="$mnt/cache" "$bin" ls --json 2>"$work/ls.err") || { echo "ls failed: $(head -3 "$work/ls.err")"; return 1; }
  echo "$listed" | python3 -c '
import json, sys
done, evicted = {}, {}
for path, seen, kind in ((sys.argv[1], done, "done"), (sys.argv[2], evicted, "evicted")):
    try: lines = open(path).read().splitlines()
    except OSError: continue
    for line in lines:
        try: o = json.loads(line)
        except ValueError: continue
        if o.get("event") == kind and (kind == "evicted" or o.get("complete")):
            seen[o["url"]] = max(seen.get(o["url"], ""), o.get("time", ""))
said = set(u for u, t in done.items() if t > evicted.get(u, ""))
events = []
try: events = [json.loads(l).get("event") for l in open(sys.argv[2]).read().splitlines() if l.strip()]
except (OSError, ValueError): pass
evicting = bool(events) and events[-1] == "evict_started"
complete, listed = set(), set()
for line in sys.stdin:
    o = json.loads(line)
    if o.get("event") != "entry": continue
    listed.add(o["url"])
    if o.get("state") == "complete": complete.add(o["url"])
lost = sorted(u for u in said - complete if u in listed or not evicting)
for u in lost:
    print("reported complete before the cut, %s after it: %s" % ("partial" if u in listed else "gone", u))
sys.exit(1 if lost else 0)
' "$work/said.json" "$work/evicted.json"
}

failures=0
for c in $(seq 1 "$cycles"); do
  mount -o loop,data=writeback,commit=1 "$work/img" "$mnt" || { echo "cycle $c: cannot mount"; failures=$((failures + 1)); break; }
  # Half the cycles start from what the last one left (resume under cuts), half from scratch.
  [ $((c % 2)) = 0 ] && rm -rf "$mnt/cache"
  # What vcache said was done goes outside the image: the cut must not take it back. Each
  # workload runs in a process group of its own (setsid), killed whole at the cut.
  # (played.serve too: serve's redirect truncates it in the child, after the parent may already
  # have read last cycle's port from it.)
  : >"$work/said.json"; : >"$work/evicted.json"; : >"$work/played"; : >"$work/played.serve"
  export VCACHE_DIR="$mnt/cache"
  case $((c % 4)) in
    1) workload="prefetch -j 4"
       setsid "${run[@]}" prefetch --json -i "$list" -j 4 --limit-rate 12M >"$work/said.json" 2>/dev/null & ;;
    2) workload="prefetch URL, one at a time"
       setsid bash -c 'while read -r u; do "$@" prefetch --json --limit-rate 12M "$u"; done < "$0"' "$list" "${run[@]}" >"$work/said.json" 2>/dev/null & ;;
    3) workload="prefetch -j 8 beside evict and verify --fix"
       setsid bash -c 'said=$1 evicted=$2; shift 2
         "$@" prefetch --json -i "$0" -j 8 --limit-rate 6M >"$said" 2>/dev/null &
         while :; do echo "{\"event\":\"evict_started\"}" >>"$evicted"; "$@" evict --json --lru --max-size 12M >>"$evicted" 2>/dev/null; "$@" verify --fix >/dev/null 2>&1; done' \
         "$list" "$work/said.json" "$work/evicted.json" "${run[@]}" & ;;
    0) workload="serve with three players"
       setsid bash -c 'list=$1; shift
         "$@" serve --port 0 --quiet --limit-rate 12M >"$0.serve" 2>/dev/null &
         for _ in $(seq 1 100); do grep -q http "$0.serve" 2>/dev/null && break; sleep 0.05; done
         port=$(sed -n "1s/.*:\([0-9]*\).*/\1/p" "$0.serve")
         for p in 1 2 3; do
           (while read -r u; do curl -s -o /dev/null "$("$@" url --port "$port" "$u")" && echo "$u" >>"$0"; done < "$list") &
         done; wait' "$work/played" "$list" "${run[@]}" & ;;
  esac
  pid=$!
  # The cut comes at a random moment after the first video was reported complete (before that,
  # there is nothing said to take back, and the control could not fail) or, under serve, played
  # whole: 0.3 to 1.5 s later, past ext4's one-second commit (a cut before it loses little even
  # without fsync).
  for _ in $(seq 1 200); do
    grep -q '"event":"done"' "$work/said.json" 2>/dev/null && break
    [ -s "$work/played" ] && break
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  sleep "$(python3 -c 'import random; print(round(random.uniform(0.3, 1.5), 2))')"
  [ -n "${POWERCUT_DEBUG:-}" ] && echo "cycle $c ($workload): cut after $(grep -c '"event":"done"' "$work/said.json") done, $(grep -c '"event":"evicted"' "$work/evicted.json") evicted, $(wc -l < "$work/played") played"
  python3 -c 'import fcntl, os, struct, sys; fd = os.open(sys.argv[1], os.O_RDONLY); fcntl.ioctl(fd, 0x8004587D, struct.pack("I", 2))' "$mnt"
  kill -9 -- "-$pid" 2>/dev/null; wait "$pid" 2>/dev/null
  # Every process of the group gone before the unmount (a slow one, under ASan, kept it busy: a
  # lazy unmount then left the shut-down file system attached, and the next mount reused it).
  for _ in $(seq 1 600); do kill -0 -- "-$pid" 2>/dev/null || break; sleep 0.05; done
  pid=""
  unset VCACHE_DIR
  umount "$mnt" || { echo "cycle $c: cannot unmount after the cut: $(fuser -vm "$mnt" 2>&1 | tail -3)"; failures=$((failures + 1)); break; }
  mount -o loop,data=writeback,commit=1 "$work/img" "$mnt" || { echo "cycle $c: the file system does not mount after the cut"; failures=$((failures + 1)); break; }
  ls "$mnt" >/dev/null || { echo "cycle $c: the file system mounted after the cut cannot be read"; failures=$((failures + 1)); break; }
  problem=""
  # A serve that never said where it listens tested nothing.
  [ $((c % 4)) = 0 ] && ! grep -q http "$work/played.serve" && problem="serve did not start: $(head -c 300 "$work/played.serve")"
  # A cycle with no cache after the cut checked nothing: the cut comes after a video was reported
  # complete, so the cache folder it was in must be there.
  [ -z "$problem" ] && [ ! -d "$mnt/cache" ] && problem="no cache folder after the cut ($(grep -c '"event":"done"' "$work/said.json") videos said done, $(wc -l < "$work/played") played)"
  if [ -z "$problem" ]; then
    out=$(check_claims 2>&1) || problem="$out"
    if [ -z "$problem" ]; then
      out=$(check_said 2>&1) || problem="$out"
    fi
    if [ -z "$problem" ]; then
      v=$(VCACHE_DIR="$mnt/cache" "$bin" verify 2>&1) || problem="verify: $(echo "$v" | tail -3)"
    fi
    if [ -z "$problem" ]; then
      VCACHE_DIR="$mnt/cache" "$bin" prefetch -q -i "$list" -j 4 >/dev/null 2>&1 || problem="the resume failed"
      out=$(check_claims 2>&1) || problem="after the resume: $out"
      for i in 1 2 3 4 5 6; do
        want=$(sha256sum < "$root/v$i.bin" | cut -d' ' -f1)
        got=$(VCACHE_DIR="$mnt/cache" "$bin" info "http://127.0.0.1:$ORIGIN_PORT/v$i.bin" --json 2>/dev/null | python3 -c 'import json,sys; print(json.load(sys.stdin).get("sha256",""))' 2>/dev/null)
        [ "$want" = "$got" ] || { problem="after the resume v$i.bin is not byte-exact"; break; }
      done
    fi
  fi
  if [ -n "$problem" ]; then
    failures=$((failures + 1))
    echo "cycle $c ($workload): $problem" | head -5
  fi
  umount "$mnt"
done

if [ "$control" = --control ]; then
  echo "control (eatmydata: fsync does nothing): $failures of $cycles cycles failed"
  [ "$failures" -gt 0 ] && exit 0
  echo "the harness did not see a missing fsync"; exit 1
fi
echo "power cuts: $cycles cycles, $failures failed"
[ "$failures" = 0 ]
