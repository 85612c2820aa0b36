#!/usr/bin/env bash
# make crash-replay STATES=N: every crash point of a recorded vcache run, replayed (issue 25;
# ALICE / CrashMonkey style). recorder.c (LD_PRELOAD) logs every write, sync and namespace change
# vcache makes under its cache folder, with the bytes; replay.py rebuilds the folder as a crash
# right after each fsync/fdatasync would leave it (unsynced writes dropped; within the budget, also
# kept in random subsets and torn at 512-byte sectors; SQLite's files included) and checks each
# state with vcache against the origin's bytes. Docs/reliability.md says what is assumed.
#
#   crash-replay.sh VCACHE [STATES] [--strace]
#
# Two recorded workloads, from a local nginx serving random-byte videos:
#   1. prefetch --bytes 1M -i list -j 4 (the heads), then prefetch -i list -j 4 (the rest: a resume);
#   2. on the finished cache, with an orphan entry folder added: evict one video (which sweeps
#      the orphan too), verify --fix, prefetch -i list -j 4 (fetches it again);
#   3. the heads cached, then two videos changed at the origin (new bytes, a new ETag): prefetch
#      -i list -j 4 drops their bytes and fetches them again (claims must be all of one version);
#   4. serve, a player (curl) reading a range of one video and then every video through it, stopped
#      with SIGTERM.
# STATES (default 200) bounds the states per workload: every fsync boundary first, the rest random
# subset and torn variants; workloads 1 and 2 replay every boundary even past STATES. Then the negative controls replay workload 1 with vcache's fsyncs of
# `data` ignored (SQLite's still count), and with every fsync ignored: each must find failures, or
# the harness could not see a missing fsync.
# --strace: first records the workloads' commands under `strace -f` too and compares, call by call kind, what
# the recorder saw with the syscalls made on files in the cache (strace-check.py).
# CRASH_REPLAY_MODEL=posix replays the workloads under POSIX alone (a folder's entries durable only
# once the folder is fsynced; vcache relies on the journal instead: Docs/reliability.md).
# CRASH_REPLAY_SEED=N repeats the variants; CRASH_REPLAY_KEEP=1 keeps the work folder.
# Needs cc, python3, curl and nginx (not root; strace for --strace); where one is missing it says
# "skipped: ..." and exits 2 (a skip is never a pass); nginx that does not start is a failure.
# Exit 0: no state failed and both controls failed; 1 otherwise.
set -uo pipefail
bin=${1:?usage: crash-replay.sh VCACHE [STATES] [--strace]}
states=${2:-200}
mode=${3:-}
here=$(cd "$(dirname "$0")" && pwd)

skip() { echo "skipped: $1"; exit 2; }
for t in cc python3 curl; do command -v $t >/dev/null || skip "$t is missing"; done
command -v nginx >/dev/null || [ -x /usr/sbin/nginx ] || skip "nginx is missing"
if [ "$mode" = --strace ] && ! command -v strace >/dev/null; then skip "strace is missing (--strace)"; fi
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")

work=$(mktemp -d "${TMPDIR:-/tmp}/vcache-crash-replay-XXXXXX")
work=$(cd "$work" && pwd -P)  # the recorder compares real paths
cleanup() {
  [ -n "${serve_pid:-}" ] && kill -9 "$serve_pid" 2>/dev/null && wait "$serve_pid" 2>/dev/null
  # SIGKILL: a parent that blocks SIGTERM (a test runner) passes the mask on to nginx.
  [ -n "${ORIGIN_PID:-}" ] && kill -9 "$ORIGIN_PID" 2>/dev/null && wait "$ORIGIN_PID" 2>/dev/null
  [ -z "${CRASH_REPLAY_KEEP:-}" ] && rm -rf "$work"
}
trap cleanup EXIT

cc -shared -fPIC -O2 -o "$work/recorder.so" "$here/recorder.c" -ldl -lpthread 2>"$work/cc.log" \
  || { cat "$work/cc.log"; echo "the recorder does not build"; exit 1; }
. "$here/../Scripts/nginx-origin.sh"
root="$work/origin"; mkdir -p "$root"
# Random bytes (a claim of a wrong byte cannot go unseen), odd sizes (a last partial sector):
# 0.5, 2, 4.5 and 8 MiB, a few bytes more; the largest spans several 4 MiB checkpoints.
for i in 1 2 3 4; do head -c $(( ((i * i) << 19) + RANDOM % 4096 + 1 )) /dev/urandom > "$root/v$i.bin"; done
start_origin "$work/nginx" "$root" >/dev/null || { echo "nginx did not start: $(tail -3 "$work/nginx/error.log" 2>/dev/null)"; exit 1; }
list="$work/urls.txt"
for i in 1 2 3 4; do echo "http://127.0.0.1:$ORIGIN_PORT/v$i.bin"; done > "$list"

# record NAME CMD...: runs vcache on $work/NAME/cache with the recorder, appending to NAME/log.
record() {
  local name=$1; shift
  VCACHE_DIR="$work/$name/cache" VCACHE_RECORD_DIR="$work/$name/cache" VCACHE_RECORD_LOG="$work/$name/log" \
    LD_PRELOAD="$work/recorder.so" "$bin" "$@" >>"$work/$name/said.json" 2>>"$work/$name/stderr"
}

# traced N CMD...: runs vcache on $work/strace/cache under both the recorder and strace -f.
traced() {
  local n=$1; shift
  VCACHE_DIR="$work/strace/cache" VCACHE_RECORD_DIR="$work/strace/cache" VCACHE_RECORD_LOG="$work/strace/log" \
    LD_PRELOAD="$work/recorder.so" strace -f -qq -y -o "$work/strace/trace.$n" \
    -e trace=%file,write,pwrite64,writev,pwritev,pwritev2,fsync,fdatasync,sync_file_range,ftruncate,fallocate,close \
    "$bin" "$@" >/dev/null 2>>"$work/strace/stderr"
}
if [ "$mode" = --strace ]; then
  mkdir -p "$work/strace"
  # Every kind of run the workloads make: a prefetch, an evict, verify --fix, a resume.
  traced 1 prefetch --bytes 1M -i "$list" -j 4 && traced 2 prefetch -i "$list" -j 4 \
    && traced 3 evict "http://127.0.0.1:$ORIGIN_PORT/v3.bin" && traced 4 verify --fix \
    && traced 5 prefetch -i "$list" -j 4 || { echo "a traced run failed: $(tail -2 "$work/strace/stderr")"; exit 1; }
  python3 "$here/strace-check.py" "$work/strace/log" "$work/strace/cache" "$work"/strace/trace.[1-5] || exit 1
fi

# Workload 1: the heads, then the rest.
mkdir -p "$work/w1"
record w1 prefetch --json --bytes 1M -i "$list" -j 4 || { echo "workload 1: the first prefetch failed"; exit 1; }
record w1 prefetch --json -i "$list" -j 4 || { echo "workload 1: the second prefetch failed"; exit 1; }

# Workload 2: from workload 1's cache, plus an orphan folder (a writer's crash before its first
# checkpoint leaves one); evict, verify --fix, prefetch again.
mkdir -p "$work/w2"
cp -a "$work/w1/cache" "$work/w2/cache"
orphan=$(printf 'ab%062d' 0)
mkdir -p "$work/w2/cache/entries/${orphan:0:2}/$orphan"
head -c 5000 /dev/urandom > "$work/w2/cache/entries/${orphan:0:2}/$orphan/data"
cp -a "$work/w2/cache" "$work/w2/snapshot"
record w2 evict --json "http://127.0.0.1:$ORIGIN_PORT/v3.bin" || { echo "workload 2: evict failed"; exit 1; }
record w2 verify --json --fix || { echo "workload 2: verify --fix failed"; exit 1; }
record w2 prefetch --json -i "$list" -j 4 || { echo "workload 2: the prefetch failed"; exit 1; }

failed=0
# Workloads 1 and 2 (a prefetch and its resume; evict, verify --fix, prefetch) replay every fsync
# boundary whatever STATES is (STATES bounds the variants after them); 3 and 4 stay within STATES.
replay() {
  python3 "$here/replay.py" --log "$work/$1/log" --root "$work/$1/cache" --snapshot "${3:-}" --vcache "$bin" \
    --origin "$root" --list "$list" --work "$work/$1/replay" --states "$states" --label "$2" ${4:-} \
    --model "${CRASH_REPLAY_MODEL:-ext4}" ${CRASH_REPLAY_SEED:+--seed $CRASH_REPLAY_SEED}
}
replay w1 "workload 1 (prefetch heads, then the rest)" "" --every-boundary || failed=1
replay w2 "workload 2 (evict, verify --fix, prefetch)" "$work/w2/snapshot" --every-boundary || failed=1

# Workload 4: serve, with a player (curl) reading through it: a range of one video, then each video
# whole (serve stores what it streams), then serve stopped with SIGTERM.
mkdir -p "$work/w4"
VCACHE_DIR="$work/w4/cache" VCACHE_RECORD_DIR="$work/w4/cache" VCACHE_RECORD_LOG="$work/w4/log" \
  LD_PRELOAD="$work/recorder.so" "$bin" serve --port 0 -q >"$work/w4/serve.out" 2>>"$work/w4/stderr" &
serve_pid=$!
for _ in $(seq 1 200); do
  grep -q '^http://' "$work/w4/serve.out" 2>/dev/null && break
  kill -0 "$serve_pid" 2>/dev/null || break
  sleep 0.05
done
serve_port=$(head -1 "$work/w4/serve.out" | sed -n 's|^http://127.0.0.1:\([0-9]*\).*|\1|p')
[ -n "$serve_port" ] || { echo "workload 4: serve did not start: $(tail -2 "$work/w4/stderr")"; exit 1; }
play() { curl -sf -o /dev/null "$@"; }
ok=1
play -r 1000000-2999999 "$("$bin" url --port "$serve_port" "http://127.0.0.1:$ORIGIN_PORT/v4.bin")" || ok=0
while read -r u; do play "$("$bin" url --port "$serve_port" "$u")" || ok=0; done < "$list"
kill -TERM "$serve_pid"; wait "$serve_pid"; serve_pid=
[ "$ok" = 1 ] || { echo "workload 4: a read through serve failed: $(tail -2 "$work/w4/stderr")"; exit 1; }
replay w4 "workload 4 (serve: a range, then every video read through it)" || failed=1

# Workload 3: the heads cached, then two videos change at the origin (new bytes, a new ETag): the
# prefetch drops their cached bytes (rows first, then a new empty data) and fetches them again.
mkdir -p "$work/w3"
VCACHE_DIR="$work/w3/cache" "$bin" prefetch -q --bytes 1M -i "$list" -j 4 || { echo "workload 3: the heads failed"; exit 1; }
cp -a "$work/w3/cache" "$work/w3/snapshot"
mkdir -p "$work/origin-old"
for i in 2 4; do
  cp -p "$root/v$i.bin" "$work/origin-old/v$i.bin"
  head -c "$(stat -c %s "$root/v$i.bin")" /dev/urandom > "$root/v$i.bin.new"
  touch -d "@$(( $(stat -c %Y "$root/v$i.bin") + 100 ))" "$root/v$i.bin.new"  # another ETag
  mv "$root/v$i.bin.new" "$root/v$i.bin"
done
record w3 prefetch --json -i "$list" -j 4 || { echo "workload 3: the prefetch failed"; exit 1; }
python3 "$here/replay.py" --log "$work/w3/log" --root "$work/w3/cache" --snapshot "$work/w3/snapshot" --vcache "$bin" \
  --origin "$root" --old-origin "$work/origin-old" --list "$list" --work "$work/w3/replay" --states "$states" \
  --label "workload 3 (two videos changed at the origin, prefetch)" --model "${CRASH_REPLAY_MODEL:-ext4}" \
  ${CRASH_REPLAY_SEED:+--seed $CRASH_REPLAY_SEED} || failed=1
control_states=$(( states < 60 ? states : 60 ))
for control in data all; do
  case $control in data) label="control (vcache's fsync of data ignored)";; all) label="control (every fsync ignored)";; esac
  out=$(python3 "$here/replay.py" --log "$work/w1/log" --root "$work/w1/cache" --vcache "$bin" --origin "$root" \
    --list "$list" --work "$work/w1/control-$control" --states "$control_states" --control $control --label "$label" \
    ${CRASH_REPLAY_SEED:+--seed $CRASH_REPLAY_SEED})
  echo "$out" | tail -1
  if ! echo "$out" | tail -1 | grep -Eq ', [1-9][0-9]* failed'; then
    echo "$label found no failure: the harness does not see a missing fsync"; failed=1
  fi
done
[ "$failed" = 0 ] && echo "crash replay: passed" || echo "crash replay: FAILED"
exit "$failed"
