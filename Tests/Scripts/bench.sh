#!/usr/bin/env bash
# make bench: vcache against curl and aria2 on the same nginx, in one run, reported as ratios.
# Timings are wall / CPU (user+sys) / peak RSS from /usr/bin/time. Nothing here is a pass/fail test.
set -euo pipefail
VCACHE=${1:?usage: bench.sh PATH-TO-VCACHE}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/nginx-origin.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/vcache-bench-XXXXXX")
trap 'stop_origin; rm -rf "$work"' EXIT
mkdir -p "$work/www/heads"
SIZE_MB=${BENCH_SIZE_MB:-1024}
HEADS=${BENCH_HEADS:-500}
echo "preparing: a ${SIZE_MB} MiB file and $HEADS URLs of 4 MiB videos"
head -c $((SIZE_MB << 20)) /dev/urandom > "$work/www/big.bin"
head -c $((4 << 20)) /dev/urandom > "$work/www/heads/v.mp4"
for i in $(seq 1 "$HEADS"); do ln -s v.mp4 "$work/www/heads/v$i.mp4"; done
start_origin "$work/nginx" "$work/www"
base="http://127.0.0.1:$ORIGIN_PORT"
T=/usr/bin/time

measure() { # label, command...: prints "wall cpu rss_kib"
  local out; out=$("$T" -f '%e %U %S %M' "${@:2}" 2>&1 >/dev/null | tail -1)
  awk -v l="$1" '{printf "%s %.3f %.3f %d\n", l, $1, $2+$3, $4}' <<<"$out"
}
# The page cache and the disk's writeback dominate single runs on a small VM, so the two tools
# are run alternately, each from a clean, synced state, and the median of each is reported.
ROUNDS=${BENCH_ROUNDS:-5}
median() { sort -k2 -n | awk '{ a[NR] = $0 } END { print a[int((NR + 1) / 2)] }'; }
duel() { # curl-command ||| vcache-command: sets C and V to the medians
  local split=0 cmd_c=() cmd_v=()
  for a in "$@"; do
    if [ "$a" = "|||" ]; then split=1; continue; fi
    if [ $split = 0 ]; then cmd_c+=("$a"); else cmd_v+=("$a"); fi
  done
  : > "$work/c.txt"; : > "$work/v.txt"
  for _ in $(seq 1 "$ROUNDS"); do
    rm -rf "$work/cache" "$work/out"; mkdir -p "$work/out"; sync
    measure curl "${cmd_c[@]}" >> "$work/c.txt"
    rm -rf "$work/cache" "$work/out"; mkdir -p "$work/out"; sync
    measure vcache "${cmd_v[@]}" >> "$work/v.txt"
  done
  C=$(median < "$work/c.txt"); V=$(median < "$work/v.txt")
}

echo; echo "== one ${SIZE_MB} MiB download (median of $ROUNDS, alternating; vcache includes SHA-256 and its fsyncs)"
duel curl -s -o "$work/out/big" "$base/big.bin" "|||" env VCACHE_DIR="$work/cache" "$VCACHE" prefetch -q "$base/big.bin"
c=$C v=$V
printf '%-8s wall %7.3fs  cpu %7.3fs  rss %6d KiB\n' $c
printf '%-8s wall %7.3fs  cpu %7.3fs  rss %6d KiB\n' $v
read -r _ cw cc cr <<<"$c"; read -r _ vw vc vr <<<"$v"
# curl leaves the file in dirty pages; vcache's checkpoints make every byte durable (invariant 1),
# so it also waits for the disk. curl followed by an fsync of its file is the like-for-like figure.
duel sh -c "curl -s -o '$work/out/big' '$base/big.bin' && sync '$work/out/big'" "|||" true
cs=$C
printf '%-8s wall %7.3fs  cpu %7.3fs  rss %6d KiB\n' curl+fsync $(echo "$cs" | cut -d' ' -f2-)
read -r _ csw _ _ <<<"$cs"
awk -v cw="$cw" -v vw="$vw" -v cc="$cc" -v vc="$vc" -v vr="$vr" -v csw="$csw" 'BEGIN {
  printf "throughput vcache/curl: %.2f (target >= 1.0)\n", cw / vw
  printf "throughput vcache/(curl+fsync): %.2f\n", csw / vw
  printf "CPU per byte vcache/curl: %.2f (target <= 1.3)\n", vc / cc
  printf "peak RSS vcache: %.1f MiB (target < 32)\n", vr / 1024 }'

echo; echo "== $HEADS heads of 1 MiB, 8 at a time (median of $ROUNDS, alternating)"
: > "$work/urls.txt"; : > "$work/curl.cfg"
for i in $(seq 1 "$HEADS"); do
  echo "$base/heads/v$i.mp4" >> "$work/urls.txt"
  printf 'url = "%s"\noutput = "%s/out/v%s"\nrange = "0-1048575"\n' "$base/heads/v$i.mp4" "$work" "$i" >> "$work/curl.cfg"
done
duel curl -s --parallel --parallel-max 8 -K "$work/curl.cfg" "|||" env VCACHE_DIR="$work/cache" "$VCACHE" prefetch -q -j 8 --bytes 1M -i "$work/urls.txt"
c=$C v=$V
printf '%-8s wall %7.3fs  cpu %7.3fs  rss %6d KiB\n' $c
printf '%-8s wall %7.3fs  cpu %7.3fs  rss %6d KiB\n' $v
read -r _ cw _ _ <<<"$c"; read -r _ vw _ _ <<<"$v"
awk -v cw="$cw" -v vw="$vw" 'BEGIN { printf "wall vcache/curl: %.2f (target <= 1.0)\n", vw / cw }'

echo; echo "== ls over 10,000 entries"
rm -rf "$work/cache"; env VCACHE_DIR="$work/cache" "$VCACHE" ls >/dev/null
sqlite3 "$work/cache/catalog.db" "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < 10000)
  INSERT INTO entries (key, url, latest_url, length, created, last_used, cached_bytes, disk_bytes)
  SELECT printf('%064x', i), 'https://cdn.example/v/' || i || '.mp4', 'https://cdn.example/v/' || i || '.mp4', 4194304, 1.7e9, 1.7e9 + i, 1048576, 1048576 FROM n;"
v=$(measure ls env VCACHE_DIR="$work/cache" "$VCACHE" ls)
printf '%-8s wall %7.3fs  cpu %7.3fs  rss %6d KiB  (target < 0.5 s)\n' $v

echo; echo "== evict half of 10,000 entries to a cap"
# The synthetic rows each claim 1 MiB on disk; a cap of 5,000 MiB evicts the 5,000 least recently used.
v=$(measure evict env VCACHE_DIR="$work/cache" "$VCACHE" evict --lru --max-size 5000M)
printf '%-8s wall %7.3fs  cpu %7.3fs  rss %6d KiB  (target < 1 s)\n' $v
left=$(sqlite3 "$work/cache/catalog.db" "SELECT COUNT(*) FROM entries")
echo "entries left: $left"

echo; echo "== serve: a cached ${SIZE_MB} MiB file through the proxy against nginx on the same file (median of $ROUNDS)"
rm -rf "$work/cache"
env VCACHE_DIR="$work/cache" "$VCACHE" prefetch -q "$base/big.bin"
env VCACHE_DIR="$work/cache" "$VCACHE" serve --port 0 > "$work/serve.out" 2> "$work/serve.log" &
serve_pid=$!
for _ in $(seq 1 100); do [ -s "$work/serve.out" ] && break; sleep 0.05; done
proxy=$(env VCACHE_DIR="$work/cache" "$VCACHE" url "$base/big.bin" --port "$(sed 's/.*://' "$work/serve.out" | head -1)")
: > "$work/c.txt"; : > "$work/v.txt"
for _ in $(seq 1 "$ROUNDS"); do
  measure nginx curl -s -o /dev/null "$base/big.bin" >> "$work/c.txt"
  measure vcache curl -s -o /dev/null "$proxy" >> "$work/v.txt"
done
c=$(median < "$work/c.txt"); v=$(median < "$work/v.txt")
printf '%-8s wall %7.3fs\n' $(echo "$c" | cut -d' ' -f1-2) $(echo "$v" | cut -d' ' -f1-2)
read -r _ nw _ _ <<<"$c"; read -r _ pw _ _ <<<"$v"
awk -v nw="$nw" -v pw="$pw" 'BEGIN { printf "throughput proxy/nginx: %.2f (target >= 0.9)\n", nw / pw }'
ttfb() { for _ in $(seq 1 200); do curl -s -o /dev/null -r 0-65535 -w '%{time_starttransfer}\n' "$1"; done | sort -n | awk '{ a[NR] = $1 } END { printf "%.2f", a[int((NR + 1) / 2)] * 1000 }'; }
printf 'time to first byte of a cached 64 KiB head, median of 200: nginx %s ms, proxy %s ms (target < 1 ms)\n' "$(ttfb "$base/big.bin")" "$(ttfb "$proxy")"
kill "$serve_pid"; wait "$serve_pid" 2>/dev/null || true
