#!/usr/bin/env bash
# make bench-ab PREVIOUS=path/to/old/vcache: the previous release binary against this one on the
# workloads a change must not slow (issue 34: serve's cached 1 GiB, time to first byte, cached
# segments; the 1 GiB download and the 500 heads), in alternating rounds on the same machine, the
# same nginx and, for serve, the same cache served by both at once. Each figure is a median; the
# ratio new/previous is taken pair by pair (round by round) and its median printed, so a machine
# whose speed drifts during the run moves both sides of each pair alike. Not a pass/fail test.
# BENCH_QUICK=1 runs every workload at about 1/20 of the size; BENCH_AB_ONLY=serve only serve's.
set -euo pipefail
OLD=${1:?usage: bench-ab.sh PREVIOUS-VCACHE NEW-VCACHE}
NEW=${2:?usage: bench-ab.sh PREVIOUS-VCACHE NEW-VCACHE}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/nginx-origin.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/vcache-ab-XXXXXX")
pids=()
trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; stop_origin; rm -rf "$work"' EXIT
if [ "${BENCH_QUICK:-0}" = 1 ]; then
  SIZE_MB=52; HEADS=25; ROUNDS=${BENCH_ROUNDS:-3}; TTFB_N=40; SEGMENTS=20
else
  SIZE_MB=1024; HEADS=500; ROUNDS=${BENCH_ROUNDS:-7}; TTFB_N=200; SEGMENTS=200
fi
for tool in curl nginx ffmpeg /usr/bin/time; do
  command -v "$tool" >/dev/null || [ -x "$tool" ] || { echo "bench-ab: $tool is missing (make bench installs it)" >&2; exit 1; }
done
echo "previous: $("$OLD" --version | head -1); new: $("$NEW" --version | head -1); $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ), $ROUNDS rounds"
mkdir -p "$work/www/heads" "$work/www/hls"
head -c $((SIZE_MB << 20)) /dev/urandom > "$work/www/big.bin"
{ printf '\0\0\0\030uuid'; head -c $(((4 << 20) - 8)) /dev/urandom; } > "$work/www/heads/v.mp4"
for i in $(seq 1 "$HEADS"); do ln -s v.mp4 "$work/www/heads/v$i.mp4"; echo "/heads/v$i.mp4"; done > "$work/heads.txt"
ffmpeg -nostdin -v error -y -f lavfi -i "nullsrc=s=640x360:r=25,geq=random(1)*255:128:128" -t 2 \
  -c:v libx264 -preset ultrafast -b:v 8M -maxrate 8M -bufsize 4M -f mpegts "$work/www/hls/seg.ts"
{ printf '#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n'
  for i in $(seq -w 1 "$SEGMENTS"); do printf '#EXTINF:2.0,\ns%s.ts\n' "$i"; ln -s seg.ts "$work/www/hls/s$i.ts"; done
  printf '#EXT-X-ENDLIST\n'; } > "$work/www/hls/index.m3u8"
start_origin "$work/nginx" "$work/www"
base="http://127.0.0.1:$ORIGIN_PORT"
sed -i "s|^|$base|" "$work/heads.txt"

# wall SECONDS-OF-ONE-COMMAND: runs it, prints "wall cpu"
timed() { /usr/bin/time -f '%e %U %S' "$@" 2>&1 >/dev/null | tail -1 | awk '{ printf "%.3f %.3f\n", $1, $2 + $3 }'; }
median() { sort -g | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
# report NAME UNIT FILE-OLD FILE-NEW (one figure a line, round by round): medians, and the median
# of the pair-by-pair ratios new/old.
table=()
report() {
  local mo mn r
  mo=$(median < "$3"); mn=$(median < "$4")
  r=$(paste "$3" "$4" | awk '{ printf "%.4f\n", $2 / $1 }' | median)
  printf '  %-44s previous %9.3f %s  new %9.3f %s  new/previous %.2f\n' "$1" "$mo" "$2" "$mn" "$2" "$r"
  table+=("| $1 | $mo $2 | $mn $2 | $(printf '%.2f' "$r") |")
}

if [ "${BENCH_AB_ONLY:-}" != serve ]; then
echo; echo "== prefetch: one ${SIZE_MB} MiB download; $HEADS heads of 1 MiB, -j 8 (wall, then CPU)"
for w in big heads; do : > "$work/$w-old.w"; : > "$work/$w-new.w"; : > "$work/$w-old.c"; : > "$work/$w-new.c"; done
for _ in $(seq 1 "$ROUNDS"); do
  for side in old new; do
    bin=$OLD; [ $side = new ] && bin=$NEW
    rm -rf "$work/cache"; sync
    read -r w c <<<"$(timed env VCACHE_DIR="$work/cache" "$bin" prefetch -q "$base/big.bin")"
    echo "$w" >> "$work/big-$side.w"; echo "$c" >> "$work/big-$side.c"
    rm -rf "$work/cache"; sync
    read -r w c <<<"$(timed env VCACHE_DIR="$work/cache" "$bin" prefetch -q -j 8 --bytes 1M -i "$work/heads.txt")"
    echo "$w" >> "$work/heads-$side.w"; echo "$c" >> "$work/heads-$side.c"
  done
done
report "one ${SIZE_MB} MiB download, wall" s "$work/big-old.w" "$work/big-new.w"
report "one ${SIZE_MB} MiB download, CPU" s "$work/big-old.c" "$work/big-new.c"
report "$HEADS heads of 1 MiB, -j 8, wall" s "$work/heads-old.w" "$work/heads-new.w"
report "$HEADS heads of 1 MiB, -j 8, CPU" s "$work/heads-old.c" "$work/heads-new.c"
fi

# Each binary serves a cache of its own, filled by itself: an older binary refuses a catalog a
# newer one has migrated (Docs/cache-format.md), so one cache cannot serve both.
echo; echo "== serve: both binaries at once, each from the cache it filled with the same files"
declare -A port
for side in old new; do
  bin=$OLD; [ $side = new ] && bin=$NEW
  rm -rf "$work/cache-$side"
  env VCACHE_DIR="$work/cache-$side" "$bin" prefetch -q "$base/big.bin"
  env VCACHE_DIR="$work/cache-$side" "$bin" prefetch -q -j 8 "$base/hls/index.m3u8"
  env VCACHE_DIR="$work/cache-$side" "$bin" serve --port 0 --quiet > "$work/serve-$side.out" 2> "$work/serve-$side.log" &
  pids+=($!)
  for _ in $(seq 1 200); do [ -s "$work/serve-$side.out" ] && break; sleep 0.05; done
  port[$side]=$(sed 's/.*://' "$work/serve-$side.out" | head -1)
  [ -n "${port[$side]}" ] || { echo "bench-ab: the $side serve did not start: $(cat "$work/serve-$side.log")" >&2; exit 1; }
done
url() { env VCACHE_DIR="$work/cache-new" "$NEW" url "$2" --port "${port[$1]}"; }
for side in old new; do
  : > "$work/seg-$side.cfg"
  for i in $(seq -w 1 "$SEGMENTS"); do printf 'url = "%s"\noutput = "/dev/null"\n' "$(url $side "$base/hls/s$i.ts")" >> "$work/seg-$side.cfg"; done
  : > "$work/serve-$side.w"; : > "$work/ttfb-$side.ms"; : > "$work/seg-$side.w"
done
ttfb() { for _ in $(seq 1 "$TTFB_N"); do curl -s -o /dev/null -r 0-65535 -w '%{time_starttransfer}\n' "$1"; done | median | awk '{ printf "%.3f\n", $1 * 1000 }'; }
for _ in $(seq 1 "$ROUNDS"); do
  for side in old new; do
    timed curl -s -o /dev/null "$(url $side "$base/big.bin")" | cut -d' ' -f1 >> "$work/serve-$side.w"
    ttfb "$(url $side "$base/big.bin")" >> "$work/ttfb-$side.ms"
    timed curl -s -K "$work/seg-$side.cfg" | cut -d' ' -f1 >> "$work/seg-$side.w"
  done
done
report "serve: a cached ${SIZE_MB} MiB file, wall" s "$work/serve-old.w" "$work/serve-new.w"
report "serve: time to first byte of a cached head" ms "$work/ttfb-old.ms" "$work/ttfb-new.ms"
report "serve: $SEGMENTS cached segments in order, wall" s "$work/seg-old.w" "$work/seg-new.w"
for side in old new; do
  hits=$(curl -s "http://127.0.0.1:${port[$side]}/metrics" | awk '/^vcache_responses_total\{cache="hit"\}/ { print $2 }')
  want=$((ROUNDS * (SEGMENTS + 1 + TTFB_N)))
  [ "${hits:-0}" = "$want" ] || { echo "bench-ab: the $side serve answered ${hits:-0} of $want responses from the cache" >&2; exit 1; }
done

echo; echo "== the table for Docs/performance.md (new/previous: below 1 is faster)"
echo "| workload | previous | new | new/previous, pair by pair |"
echo "|---|---|---|---|"
printf '%s\n' "${table[@]}"
