#!/usr/bin/env bash
# make bench: vcache against curl and aria2 (and nginx for serve) on the same local nginx, in one
# run, reported as ratios. Timings are wall / CPU (user+sys) / peak RSS from /usr/bin/time, medians
# of alternating rounds, each tool from a clean, synced state. Nothing here is a pass/fail test: the
# script fails only when the harness itself breaks (a tool missing, a download that went wrong).
# BENCH_QUICK=1 (make bench-quick) runs every workload at about 1/20 of the size, in under a minute.
# BENCH_ONLY=connections, dash, ttfb or wrk runs that workload alone (dash: a 200-segment DASH
# stream against aria2; ttfb: the time to first byte of a cached head and the cached HLS segments
# read through serve; wrk: serve under load).
set -euo pipefail
VCACHE=${1:?usage: bench.sh PATH-TO-VCACHE [PATH-TO-BENCH-BUILD]}
# The bench build (-DVCACHE_BENCH_SWITCHES) honours VCACHE_BENCH_NO_SHA/NO_FSYNC; the released one does not.
VCACHE_SWITCHED=${2:-$VCACHE}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/nginx-origin.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/vcache-bench-XXXXXX")
trap 'stop_origin; rm -rf "$work"' EXIT
if [ "${BENCH_QUICK:-0}" = 1 ]; then
  SIZE_MB=${BENCH_SIZE_MB:-52}; HEADS=${BENCH_HEADS:-25}; ROUNDS=${BENCH_ROUNDS:-3}
  ENTRIES=${BENCH_ENTRIES:-1000}; RESUME_MB=16; RSS_SIZES="16 52"; TTFB_N=40; SEGMENTS=${BENCH_SEGMENTS:-20}
  WRK_MB=4; WRK_SECONDS=1
else
  SIZE_MB=${BENCH_SIZE_MB:-1024}; HEADS=${BENCH_HEADS:-500}; ROUNDS=${BENCH_ROUNDS:-5}
  ENTRIES=${BENCH_ENTRIES:-10000}; RESUME_MB=256; RSS_SIZES="64 1024 4096"; TTFB_N=200; SEGMENTS=${BENCH_SEGMENTS:-200}
  WRK_MB=16; WRK_SECONDS=5
fi
for tool in curl aria2c nginx sqlite3 ffmpeg wrk /usr/bin/time; do
  command -v "$tool" >/dev/null || [ -x "$tool" ] || { echo "bench: $tool is missing (make bench installs it)" >&2; exit 1; }
done
mkdir -p "$work/www/heads" "$work/www/small"
echo "vcache $("$VCACHE" --version | head -1 | cut -d' ' -f2), $(nproc) CPUs ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)), $(date -u +%Y-%m-%d)"
case "${BENCH_ONLY:-}" in
  ttfb|wrk|dash) : ;;  # their own files, made by their workloads
  *)
    echo "preparing: a ${SIZE_MB} MiB file, $HEADS URLs of 4 MiB videos, a ${RESUME_MB} MiB file"
    head -c $((SIZE_MB << 20)) /dev/urandom > "$work/www/big.bin"
    head -c $((RESUME_MB << 20)) /dev/urandom > "$work/www/resume.bin" ;;
esac
# Videos begin with a box (vcache refuses an .mp4 that does not): a `uuid` box, then random bytes.
{ printf '\0\0\0\030uuid'; head -c $(((4 << 20) - 8)) /dev/urandom; } > "$work/www/heads/v.mp4"
head -c $((1 << 20)) "$work/www/heads/v.mp4" > "$work/www/small/v.mp4"
for i in $(seq 1 "$HEADS"); do ln -s v.mp4 "$work/www/heads/v$i.mp4"; ln -s v.mp4 "$work/www/small/v$i.mp4"; done
for t in curl aria2 vcache; do ln -s resume.bin "$work/www/resume-$t.bin"; done
start_origin "$work/nginx" "$work/www"
base="http://127.0.0.1:$ORIGIN_PORT"
T=/usr/bin/time
V() { env VCACHE_DIR="$work/cache" "$VCACHE" "$@"; }

# measure LABEL COMMAND...: prints "LABEL wall cpu rss_kib"
measure() {
  local out; out=$("$T" -f '%e %U %S %M' "${@:2}" 2>&1 >/dev/null | tail -1)
  awk -v l="$1" '{printf "%s %.3f %.3f %d\n", l, $1, $2+$3, $4}' <<<"$out"
}
clean() { rm -rf "$work/cache" "$work/out"; mkdir -p "$work/out"; sync; }
median() { sort -k2 -n | awk '{ a[NR] = $0 } END { print a[int((NR + 1) / 2)] }'; }
# race LABEL1 'COMMAND1' LABEL2 'COMMAND2' ...: ROUNDS alternating rounds, each from a clean state;
# sets R[LABEL] to "wall cpu rss" medians.
declare -A R
race() {
  local -a labels=() cmds=()
  while [ $# -gt 0 ]; do labels+=("$1"); cmds+=("$2"); shift 2; done
  for l in "${labels[@]}"; do : > "$work/r-$l.txt"; done
  for _ in $(seq 1 "$ROUNDS"); do
    for i in "${!labels[@]}"; do clean; measure "${labels[$i]}" sh -c "${cmds[$i]}" >> "$work/r-${labels[$i]}.txt"; done
  done
  for l in "${labels[@]}"; do R[$l]=$(median < "$work/r-$l.txt" | cut -d' ' -f2-); done
}
row() { # LABEL: one line of the race's medians
  read -r w c m <<<"${R[$1]}"
  printf '  %-26s wall %7.3fs  cpu %7.3fs  rss %6.1f MiB\n' "$1" "$w" "$c" "$(awk -v m="$m" 'BEGIN{print m/1024}')"
}
f() { cut -d' ' -f"$2" <<<"${R[$1]}"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
summary=()

# Several connections for one file, against an nginx that sends each connection at most 20 MiB/s:
# vcache --connections 4 against aria2's -x4 -s4 (BENCH_ONLY=connections runs only this one).
connections_workload() {
  echo; echo "== one ${SIZE_MB} MiB download over 4 connections, each limited to 20 MiB/s (median of $ROUNDS alternating rounds)"
  race aria2-x4-s4 "aria2c -q -x4 -s4 -k4M -d '$work/out' -o big '$base/limited/big.bin'" \
       vcache-c4 "env VCACHE_DIR='$work/cache' '$VCACHE' prefetch -q --connections 4 '$base/limited/big.bin'"
  for l in aria2-x4-s4 vcache-c4; do row "$l"; done
  V prefetch -q --connections 4 "$base/limited/big.bin"
  [ "$(V ls --json | sed -n 's/.*"sha256":"\([0-9a-f]*\)".*/\1/p' | head -1)" = "$(sha256sum "$work/www/big.bin" | cut -d' ' -f1)" ] \
    || { echo "bench: --connections 4 did not cache big.bin byte-exact" >&2; exit 1; }
  echo "  throughput vcache/aria2: $(ratio "$(f aria2-x4-s4 1)" "$(f vcache-c4 1)") (target >= 1.0)"
  summary+=("| one ${SIZE_MB} MiB download, 4 connections of at most 20 MiB/s each, wall | aria2 -x4 -s4 $(f aria2-x4-s4 1) s | $(f vcache-c4 1) s | $(ratio "$(f aria2-x4-s4 1)" "$(f vcache-c4 1)")x aria2's throughput | >= 1.0 |")
}
# make_hls: one real TS segment (x264 noise, so it does not compress), listed $SEGMENTS times
# under its own names in a VOD playlist; the lists aria2 and curl read them from.
make_hls() {
  mkdir -p "$work/www/hls"
  ffmpeg -nostdin -v error -y -f lavfi -i "nullsrc=s=640x360:r=25,geq=random(1)*255:128:128" -t 2 \
    -c:v libx264 -preset ultrafast -b:v 8M -maxrate 8M -bufsize 4M -f mpegts "$work/www/hls/seg.ts"
  { printf '#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:2\n#EXT-X-PLAYLIST-TYPE:VOD\n'
    for i in $(seq -w 1 "$SEGMENTS"); do printf '#EXTINF:2.0,\ns%s.ts\n' "$i"; ln -sf seg.ts "$work/www/hls/s$i.ts"; done
    printf '#EXT-X-ENDLIST\n'; } > "$work/www/hls/index.m3u8"
  : > "$work/hls-aria2.txt"; : > "$work/hls-nginx.cfg"
  for i in $(seq -w 1 "$SEGMENTS"); do
    printf '%s\n  out=s%s.ts\n' "$base/hls/s$i.ts" "$i" >> "$work/hls-aria2.txt"
    printf 'url = "%s"\noutput = "/dev/null"\n' "$base/hls/s$i.ts" >> "$work/hls-nginx.cfg"
  done
}

# make_dash: one real fMP4 segment (x264 noise, 2 s) and its init, made by ffmpeg's DASH muxer,
# listed $SEGMENTS times under their own names by a static MPD (SegmentTemplate with $Number$ and
# @duration); the same init and segment list for aria2.
make_dash() {
  mkdir -p "$work/dash-src" "$work/www/dash"
  ffmpeg -nostdin -v error -y -f lavfi -i "nullsrc=s=640x360:r=25,geq=random(1)*255:128:128" -t 2 \
    -c:v libx264 -preset ultrafast -b:v 8M -maxrate 8M -bufsize 4M -g 50 -keyint_min 50 -sc_threshold 0 \
    -f dash -seg_duration 2 -use_template 1 -use_timeline 0 "$work/dash-src/manifest.mpd"
  cp "$work/dash-src/init-stream0.m4s" "$work/www/dash/init.m4s"
  cp "$work/dash-src/chunk-stream0-00001.m4s" "$work/www/dash/seg.m4s"
  cat > "$work/www/dash/manifest.mpd" <<MPD
<?xml version="1.0" encoding="utf-8"?>
<MPD xmlns="urn:mpeg:dash:schema:mpd:2011" profiles="urn:mpeg:dash:profile:isoff-live:2011" type="static" mediaPresentationDuration="PT$((SEGMENTS * 2))S" minBufferTime="PT4S">
<Period id="0" start="PT0S"><AdaptationSet contentType="video" mimeType="video/mp4">
<Representation id="0" codecs="avc1.42c01e" bandwidth="8000000" width="640" height="360">
<SegmentTemplate timescale="1" duration="2" startNumber="1" initialization="init.m4s" media="s\$Number%03d\$.m4s"/>
</Representation></AdaptationSet></Period></MPD>
MPD
  printf '%s\n  out=init.m4s\n' "$base/dash/init.m4s" > "$work/dash-aria2.txt"
  for i in $(seq 1 "$SEGMENTS"); do
    n=$(printf '%03d' "$i"); ln -sf seg.m4s "$work/www/dash/s$n.m4s"
    printf '%s\n  out=s%s.m4s\n' "$base/dash/s$n.m4s" "$n" >> "$work/dash-aria2.txt"
  done
}

# dash_workload: the DASH stream fetched whole, 8 at a time, by vcache from its MPD and by aria2
# from the same init and segment list.
dash_workload() {
  echo; echo "== 7b. a DASH stream of $SEGMENTS segments of 2 s (2.2 MiB each), SegmentTemplate \$Number\$: fetched whole, 8 at a time"
  make_dash
  race aria2 "aria2c -q -j 8 -d '$work/out' -i '$work/dash-aria2.txt'" \
       vcache "env VCACHE_DIR='$work/cache' '$VCACHE' prefetch -q -j 8 '$base/dash/manifest.mpd'"
  # The last round's cache (vcache runs last): the whole stream, or the harness broke.
  V ls > "$work/dash-ls.txt"
  grep -q " $SEGMENTS/$SEGMENTS segments" "$work/dash-ls.txt" || { echo "bench: vcache did not cache the DASH stream whole:" >&2; cat "$work/dash-ls.txt" >&2; exit 1; }
  for l in aria2 vcache; do row "$l"; done
  echo "  wall vcache/aria2: $(ratio "$(f vcache 1)" "$(f aria2 1)") (target <= 1.0; vcache also reads the MPD and checks every segment)"
  summary+=("| DASH: $SEGMENTS segments of 2.2 MiB fetched whole, 8 at a time, wall | aria2 -j 8 on the segment list $(f aria2 1) s | $(f vcache 1) s | $(ratio "$(f vcache 1)" "$(f aria2 1)")x aria2's wall | <= 1.0 |")
}

# start_serve [ARGS...]: vcache serve on the bench's cache, any free port; sets serve_pid and port.
start_serve() {
  env VCACHE_DIR="$work/cache" "$VCACHE" serve --port 0 "$@" > "$work/serve.out" 2> "$work/serve.log" &
  serve_pid=$!
  for _ in $(seq 1 100); do [ -s "$work/serve.out" ] && break; sleep 0.05; done
  port=$(sed 's/.*://' "$work/serve.out" | head -1)
}

# ttfb_workload NGINX-URL PROXY-URL: the median time to first byte of a cached 64 KiB head, nginx
# and the proxy asked in turn, one new connection (one curl) each; sets ttfb_row.
ttfb_workload() {
  : > "$work/t-nginx.txt"; : > "$work/t-proxy.txt"
  for _ in $(seq 1 "$TTFB_N"); do
    curl -s -o /dev/null -r 0-65535 -w '%{time_starttransfer}\n' "$1" >> "$work/t-nginx.txt"
    curl -s -o /dev/null -r 0-65535 -w '%{time_starttransfer}\n' "$2" >> "$work/t-proxy.txt"
  done
  local ms='sort -n | awk '"'"'{ a[NR] = $1 } END { printf "%.2f", a[int((NR + 1) / 2)] * 1000 }'"'"''
  local tn tp; tn=$(sh -c "$ms" < "$work/t-nginx.txt"); tp=$(sh -c "$ms" < "$work/t-proxy.txt")
  printf '  time to first byte of a cached 64 KiB head, median of %s: nginx %s ms, proxy %s ms, %sx (target <= 1.3x)\n' \
    "$TTFB_N" "$tn" "$tp" "$(ratio "$tp" "$tn")"
  ttfb_row="| serve: time to first byte of a cached 64 KiB head, median of $TTFB_N | nginx $tn ms | $tp ms | $(ratio "$tp" "$tn")x nginx's | <= 1.3x |"
}

# segments_workload: the $SEGMENTS cached segments read in order on one connection (as a player
# reads them), through the proxy against nginx serving the same files ($work/www/hls, make_hls).
segments_workload() {
  clean
  V prefetch -q -j 8 "$base/hls/index.m3u8"
  start_serve --quiet
  : > "$work/hls-proxy.cfg"
  for i in $(seq -w 1 "$SEGMENTS"); do printf 'url = "%s"\noutput = "/dev/null"\n' "$(V url "$base/hls/s$i.ts" --port "$port")" >> "$work/hls-proxy.cfg"; done
  : > "$work/c.txt"; : > "$work/v.txt"
  for _ in $(seq 1 "$ROUNDS"); do
    measure nginx curl -s -K "$work/hls-nginx.cfg" >> "$work/c.txt"
    measure vcache curl -s -K "$work/hls-proxy.cfg" >> "$work/v.txt"
  done
  local hits; hits=$(curl -s "http://127.0.0.1:$port/metrics" | awk '/^vcache_responses_total\{cache="hit"\}/ { print $2 }')
  kill "$serve_pid"; wait "$serve_pid" 2>/dev/null || true
  [ "$hits" = $((SEGMENTS * ROUNDS)) ] || { echo "bench: $hits of $((SEGMENTS * ROUNDS)) segment responses were cache hits" >&2; exit 1; }
  local nw pw
  read -r _ nw _ _ <<<"$(median < "$work/c.txt")"; read -r _ pw _ _ <<<"$(median < "$work/v.txt")"
  printf '  nginx wall %7.3fs, proxy wall %7.3fs: throughput proxy/nginx %s (target >= 0.9)\n' "$nw" "$pw" "$(ratio "$nw" "$pw")"
  summary+=("| HLS: the $SEGMENTS cached segments read in order through serve, wall | nginx $nw s | $pw s | $(ratio "$nw" "$pw")x nginx's throughput | >= 0.9 |")
}

# Serve under load: wrk asks random 1 MiB ranges of 32 cached videos of $WRK_MB MiB
# (Tests/Scripts/wrk-ranges.lua; the same seeded sequence for both), of nginx and of the proxy in
# turn, $ROUNDS rounds of $WRK_SECONDS s at each of 8, 64 and 256 connections (2 wrk threads).
# Medians of requests per second and of the p99 latency, and their ratios (target: >= 0.9x
# nginx's requests per second, p99 no worse). Every request must be answered 2xx, and every
# proxy response must be a cache hit.
wrk_workload() {
  echo; echo "== serve under load: wrk, random 1 MiB ranges of 32 cached ${WRK_MB} MiB videos (median of $ROUNDS alternating rounds of ${WRK_SECONDS} s)"
  mkdir -p "$work/www/wrk"
  for i in $(seq 1 32); do { printf '\0\0\0\030uuid'; head -c $(((WRK_MB << 20) - 8)) /dev/urandom; } > "$work/www/wrk/v$i.mp4"; done
  clean
  for i in $(seq 1 32); do echo "$base/wrk/v$i.mp4"; done > "$work/wrk-urls.txt"
  V prefetch -q -j 8 -i "$work/wrk-urls.txt"
  start_serve
  for i in $(seq 1 32); do echo "/wrk/v$i.mp4"; done > "$work/wrk-nginx.txt"
  for i in $(seq 1 32); do V url "$base/wrk/v$i.mp4" --port "$port" | sed 's|^http://[^/]*||'; done > "$work/wrk-proxy.txt"
  local c r t out
  for c in 8 64 256; do
    : > "$work/w-nginx.txt"; : > "$work/w-proxy.txt"
    for r in $(seq 1 "$ROUNDS"); do
      for t in nginx proxy; do
        local p=$ORIGIN_PORT; [ $t = proxy ] && p=$port
        out=$(WRK_PATHS="$work/wrk-$t.txt" WRK_SIZE=$((WRK_MB << 20)) WRK_SEED=$r \
          wrk -t2 -c"$c" -d"${WRK_SECONDS}s" --timeout 10s -s "$here/wrk-ranges.lua" "http://127.0.0.1:$p" | grep '^requests ')
        # "requests N errors N p50_us N p99_us N rps N"
        read -r _ _ _ errors _ _ _ p99 _ rps <<<"$out"
        [ "${errors:-1}" = 0 ] || { echo "bench: wrk met errors against $t: $out" >&2; exit 1; }
        echo "$rps $p99" >> "$work/w-$t.txt"
      done
    done
    local nr np vr vp
    nr=$(cut -d' ' -f1 "$work/w-nginx.txt" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
    np=$(cut -d' ' -f2 "$work/w-nginx.txt" | sort -n | awk '{ a[NR] = $1 } END { printf "%.1f", a[int((NR + 1) / 2)] / 1000 }')
    vr=$(cut -d' ' -f1 "$work/w-proxy.txt" | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }')
    vp=$(cut -d' ' -f2 "$work/w-proxy.txt" | sort -n | awk '{ a[NR] = $1 } END { printf "%.1f", a[int((NR + 1) / 2)] / 1000 }')
    printf '  %3s connections: nginx %8.1f req/s p99 %7.1f ms; proxy %8.1f req/s p99 %7.1f ms: req/s %sx, p99 %sx (target >= 0.9x, <= 1.0x)\n' \
      "$c" "$nr" "$np" "$vr" "$vp" "$(ratio "$vr" "$nr")" "$(ratio "$vp" "$np")"
    summary+=("| serve under wrk, random 1 MiB ranges of 32 cached videos, $c connections | nginx $nr req/s, p99 $np ms | $vr req/s, p99 $vp ms | $(ratio "$vr" "$nr")x nginx's req/s, p99 $(ratio "$vp" "$np")x | >= 0.9x, p99 <= 1.0x |")
  done
  local hits; hits=$(curl -s "http://127.0.0.1:$port/metrics" | awk '/^vcache_responses_total\{cache="(miss|partial)"\}/ { n += $2 } END { print n + 0 }')
  kill "$serve_pid"; wait "$serve_pid" 2>/dev/null || true
  [ "$hits" = 0 ] || { echo "bench: $hits wrk responses through the proxy were not cache hits" >&2; exit 1; }
}

# BENCH_ONLY: one workload alone.
case "${BENCH_ONLY:-}" in
  connections) connections_workload ;;
  wrk) wrk_workload ;;
  dash) dash_workload ;;
  ttfb)
    echo; echo "== serve: time to first byte of a cached head, and $SEGMENTS cached HLS segments read in order"
    head -c $((16 << 20)) /dev/urandom > "$work/www/ttfb.bin"
    clean
    V prefetch -q "$base/ttfb.bin"
    start_serve
    ttfb_workload "$base/ttfb.bin" "$(V url "$base/ttfb.bin" --port "$port")"
    kill "$serve_pid"; wait "$serve_pid" 2>/dev/null || true
    summary+=("$ttfb_row")
    make_hls
    segments_workload ;;
  "") ;;
  *) echo "bench: BENCH_ONLY=$BENCH_ONLY is not one of connections, dash, ttfb, wrk" >&2; exit 2 ;;
esac
if [ -n "${BENCH_ONLY:-}" ]; then
  printf '%s\n' "${summary[@]}"
  exit 0
fi
echo; echo "== 0. the binary (target: <= 20 MB stripped; Docs/performance.md, A lean binary)"
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
strip -o "$work/vcache.stripped" "$VCACHE"
deb=$(bash "$here/deb.sh" "$VCACHE" "$work/deb" | head -1)
bin_size=$(stat -c %s "$VCACHE"); stripped_size=$(stat -c %s "$work/vcache.stripped"); deb_size=$(stat -c %s "$deb")
printf '  %-26s %s\n' "binary" "$(mib "$bin_size")" "stripped" "$(mib "$stripped_size")" ".deb" "$(mib "$deb_size")"
summary+=("| binary / stripped / .deb | | $(mib "$bin_size") / $(mib "$stripped_size") / $(mib "$deb_size") | | <= 20 MB stripped |")

echo; echo "== 1. one ${SIZE_MB} MiB download (median of $ROUNDS alternating rounds)"
VC="env VCACHE_DIR='$work/cache' '$VCACHE' prefetch -q '$base/big.bin'"
VCS="env VCACHE_DIR='$work/cache' '$VCACHE_SWITCHED' prefetch -q '$base/big.bin'"
race curl "curl -s -o '$work/out/big' '$base/big.bin'" \
     curl+fsync "curl -s -o '$work/out/big' '$base/big.bin' && sync '$work/out/big'" \
     aria2-x1 "aria2c -q -x1 -s1 -d '$work/out' -o big '$base/big.bin'" \
     vcache "$VC" \
     vcache-no-sha "VCACHE_BENCH_NO_SHA=1 $VCS" \
     vcache-no-fsync "VCACHE_BENCH_NO_FSYNC=1 $VCS" \
     aria2-x4-s4 "aria2c -q -x4 -s4 -d '$work/out' -o big '$base/big.bin'"
for l in curl curl+fsync aria2-x1 vcache vcache-no-sha vcache-no-fsync aria2-x4-s4; do row "$l"; done
echo "  throughput vcache/curl: $(ratio "$(f curl 1)" "$(f vcache 1)") (target >= 1.0); vcache/(curl+fsync): $(ratio "$(f curl+fsync 1)" "$(f vcache 1)"); vcache/aria2 -x1: $(ratio "$(f aria2-x1 1)" "$(f vcache 1)")"
echo "  CPU vcache/curl: $(ratio "$(f vcache 2)" "$(f curl 2)") (target <= 1.3); SHA-256 costs $(awk -v a="$(f vcache 2)" -v b="$(f vcache-no-sha 2)" 'BEGIN{printf "%.2f", a-b}') s of CPU, the fsyncs $(awk -v a="$(f vcache 1)" -v b="$(f vcache-no-fsync 1)" 'BEGIN{printf "%.2f", a-b}') s of wall"
summary+=("| one ${SIZE_MB} MiB download, wall | curl $(f curl 1) s, curl+fsync $(f curl+fsync 1) s, aria2 -x1 $(f aria2-x1 1) s | $(f vcache 1) s | $(ratio "$(f curl 1)" "$(f vcache 1)")x curl's throughput | >= 1.0 |")
summary+=("| same, CPU (SHA-256 included) | curl $(f curl 2) s | $(f vcache 2) s (no SHA: $(f vcache-no-sha 2) s) | $(ratio "$(f vcache 2)" "$(f curl 2)")x | <= 1.3 |")
summary+=("| same, without fsyncs (bench-only switch) | | $(f vcache-no-fsync 1) s | $(ratio "$(f curl 1)" "$(f vcache-no-fsync 1)")x | |")

echo; echo "== 2. $HEADS heads of 1 MiB, 8 at a time (median of $ROUNDS alternating rounds)"
: > "$work/urls.txt"; : > "$work/curl.cfg"; : > "$work/aria2.txt"
for i in $(seq 1 "$HEADS"); do
  echo "$base/heads/v$i.mp4" >> "$work/urls.txt"
  printf 'url = "%s"\noutput = "%s/out/v%s"\nrange = "0-1048575"\n' "$base/heads/v$i.mp4" "$work" "$i" >> "$work/curl.cfg"
  printf '%s\n  out=v%s\n' "$base/small/v$i.mp4" "$i" >> "$work/aria2.txt"
done
race curl "curl -s --parallel --parallel-max 8 -K '$work/curl.cfg'" \
     aria2 "aria2c -q -j 8 -d '$work/out' -i '$work/aria2.txt'" \
     vcache "env VCACHE_DIR='$work/cache' '$VCACHE' prefetch -q -j 8 --bytes 1M -i '$work/urls.txt'"
for l in curl aria2 vcache; do row "$l"; done
echo "  wall vcache/curl: $(ratio "$(f vcache 1)" "$(f curl 1)") (target <= 1.0); vcache/aria2: $(ratio "$(f vcache 1)" "$(f aria2 1)")"
summary+=("| $HEADS heads of 1 MiB, 8 at a time, wall | curl $(f curl 1) s, aria2 $(f aria2 1) s | $(f vcache 1) s | $(ratio "$(f vcache 1)" "$(f curl 1)")x curl's wall | <= 1.0 |")

echo; echo "== 3. resume after SIGKILL half-way through ${RESUME_MB} MiB (bytes asked for again over the file's size)"
# Each tool runs rate-limited so the kill lands near the middle, then again to the end, unlimited.
rate=$((RESUME_MB / 2))M
half=1
resume() { # LABEL PATH FIRST-COMMAND SECOND-COMMAND OUTPUT-FILE
  clean
  sh -c "exec $3" & local pid=$!  # exec: the kill must reach the tool, not a shell
  sleep "$half"; kill -9 "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true
  sh -c "$4" >/dev/null 2>&1
  local sent first; sent=$(awk -v p="$2" '$2 == p { s += $5 } END { print s + 0 }' "$work/nginx/access.log")
  first=$(awk -v p="$2" '$2 == p { print $5; exit }' "$work/nginx/access.log")
  local ok=mismatch; [ "$(sha256sum < "$5")" = "$(sha256sum < "$work/www/resume.bin")" ] && ok=byte-exact
  local extra=$((sent - (RESUME_MB << 20)))
  printf '  %-8s killed after %6.1f MiB sent, re-requested %6.1f MiB (%s)\n' "$1" "$(awk -v e="$first" 'BEGIN{print e/1048576}')" \
    "$(awk -v e="$extra" 'BEGIN{print e/1048576}')" "$ok"
  [ "$ok" = byte-exact ] || { echo "bench: $1's resumed file differs from the origin's" >&2; exit 1; }
  RES[$1]=$(awk -v e="$extra" 'BEGIN{printf "%.1f", e/1048576}')
}
declare -A RES
: > "$work/nginx/access.log"
resume curl /resume-curl.bin "curl -s --limit-rate $rate -o '$work/out/r' '$base/resume-curl.bin'" \
  "curl -s -C - -o '$work/out/r' '$base/resume-curl.bin'" "$work/out/r"
resume aria2 /resume-aria2.bin "aria2c -q --max-download-limit=$rate -d '$work/out' -o r '$base/resume-aria2.bin'" \
  "aria2c -q -c -d '$work/out' -o r '$base/resume-aria2.bin'" "$work/out/r"
resume vcache /resume-vcache.bin "env VCACHE_DIR='$work/cache' '$VCACHE' prefetch -q --limit-rate $rate '$base/resume-vcache.bin'" \
  "env VCACHE_DIR='$work/cache' '$VCACHE' prefetch -q '$base/resume-vcache.bin' && env VCACHE_DIR='$work/cache' '$VCACHE' export '$base/resume-vcache.bin' '$work/out/r'" "$work/out/r"
summary+=("| resume after SIGKILL half-way through ${RESUME_MB} MiB: bytes asked again | curl -C - ${RES[curl]} MiB (nothing fsynced), aria2 ${RES[aria2]} MiB | ${RES[vcache]} MiB | | <= 16 MiB (32 MiB window) |")

echo; echo "== 4. the catalog at $ENTRIES entries"
clean; V config unset max-size >/dev/null  # makes the cache (ls only reads)
sqlite3 "$work/cache/catalog.db" "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i+1 FROM n WHERE i < $ENTRIES)
  INSERT INTO entries (key, url, latest_url, length, created, last_used, cached_bytes, disk_bytes)
  SELECT printf('%064x', i), 'https://cdn.example/v/' || i || '.mp4', 'https://cdn.example/v/' || i || '.mp4', 4194304, 1.7e9, 1.7e9 + i, 1048576, 1048576 FROM n;"
declare -A C
for w in "ls" "ls --json"; do
  read -r _ wall _ rss <<<"$(measure list env VCACHE_DIR="$work/cache" "$VCACHE" $w)"
  printf '  %-26s wall %7.3fs  rss %6.1f MiB (target < 0.5 s)\n' "$w" "$wall" "$(awk -v m="$rss" 'BEGIN{print m/1024}')"; C[$w]=$wall
done
# verify: rows without data files, so this is the catalog pass, a lock and a stat per entry.
read -r _ wall _ _ <<<"$(measure verify sh -c "env VCACHE_DIR='$work/cache' '$VCACHE' verify >/dev/null || true")"
printf '  %-26s wall %7.3fs (synthetic rows with no data: each is reported)\n' "verify" "$wall"; C[verify]=$wall
# The synthetic rows each claim 1 MiB on disk: a cap of half of them evicts the older half.
read -r _ wall _ _ <<<"$(measure evict env VCACHE_DIR="$work/cache" "$VCACHE" evict --lru --max-size "$((ENTRIES / 2))M")"
printf '  %-26s wall %7.3fs (target < 1 s); entries left: %s\n' "evict --lru to half" "$wall" "$(sqlite3 "$work/cache/catalog.db" "SELECT COUNT(*) FROM entries")"; C[evict]=$wall
summary+=("| \`ls\` / \`ls --json\` / \`verify\` over $ENTRIES entries | | ${C[ls]} s / ${C[ls --json]} s / ${C[verify]} s | | < 0.5 s (ls) |")
summary+=("| evict half of $ENTRIES entries | | ${C[evict]} s | | < 1 s |")

echo; echo "== 5. peak RSS of one download by size"
rss_row=""
for mb in $RSS_SIZES; do
  head -c $((mb << 20)) /dev/zero > "$work/www/rss-$mb.bin"
  clean
  read -r _ _ _ rss <<<"$(measure rss env VCACHE_DIR="$work/cache" "$VCACHE" prefetch -q "$base/rss-$mb.bin")"
  printf '  %5s MiB: %6.1f MiB\n' "$mb" "$(awk -v m="$rss" 'BEGIN{print m/1024}')"
  rss_row+="$(awk -v m="$rss" -v s="$mb" 'BEGIN{printf "%s MiB: %.1f MiB; ", s, m/1024}')"
  rm -f "$work/www/rss-$mb.bin"
done
summary+=("| peak RSS by download size | | ${rss_row%; } | | < 32 MiB, flat |")

echo; echo "== 6. serve: a cached ${SIZE_MB} MiB file through the proxy against nginx on the same file (median of $ROUNDS)"
clean
V prefetch -q "$base/big.bin"
env VCACHE_DIR="$work/cache" "$VCACHE" serve --port 0 > "$work/serve.out" 2> "$work/serve.log" &
serve_pid=$!
for _ in $(seq 1 100); do [ -s "$work/serve.out" ] && break; sleep 0.05; done
proxy=$(V url "$base/big.bin" --port "$(sed 's/.*://' "$work/serve.out" | head -1)")
: > "$work/c.txt"; : > "$work/v.txt"
for _ in $(seq 1 "$ROUNDS"); do
  measure nginx curl -s -o /dev/null "$base/big.bin" >> "$work/c.txt"
  measure vcache curl -s -o /dev/null "$proxy" >> "$work/v.txt"
done
c=$(median < "$work/c.txt"); v=$(median < "$work/v.txt")
read -r _ nw _ _ <<<"$c"; read -r _ pw _ _ <<<"$v"
printf '  nginx wall %7.3fs, proxy wall %7.3fs: throughput proxy/nginx %s (target >= 0.9)\n' "$nw" "$pw" "$(ratio "$nw" "$pw")"
ttfb_workload "$base/big.bin" "$proxy"
kill "$serve_pid"; wait "$serve_pid" 2>/dev/null || true
summary+=("| serve: a cached ${SIZE_MB} MiB file, wall | nginx $nw s | $pw s | $(ratio "$nw" "$pw")x nginx's throughput | >= 0.9 |")
summary+=("$ttfb_row")

echo; echo "== 7. an HLS stream of $SEGMENTS segments of 2 s (2.2 MiB each): fetched whole, 8 at a time, then played from the cache"
make_hls
race aria2 "aria2c -q -j 8 -d '$work/out' -i '$work/hls-aria2.txt'" \
     vcache "env VCACHE_DIR='$work/cache' '$VCACHE' prefetch -q -j 8 '$base/hls/index.m3u8'"
for l in aria2 vcache; do row "$l"; done
echo "  wall vcache/aria2: $(ratio "$(f vcache 1)" "$(f aria2 1)") (target <= 1.0; vcache also reads and checks the playlist and every segment)"
summary+=("| HLS: $SEGMENTS segments of 2.2 MiB fetched whole, 8 at a time, wall | aria2 -j 8 on the segment list $(f aria2 1) s | $(f vcache 1) s | $(ratio "$(f vcache 1)" "$(f aria2 1)")x aria2's wall | <= 1.0 |")
segments_workload

dash_workload

wrk_workload

connections_workload

echo; echo "== the table for Docs/performance.md"
echo "| workload | peers | vcache | ratio | target |"
echo "|---|---|---|---|---|"
printf '%s\n' "${summary[@]}"
