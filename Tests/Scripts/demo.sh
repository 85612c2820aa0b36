#!/usr/bin/env bash
# make demo: a local origin (nginx) serving a real MP4 whose moov is at the end, then vcache
# warming it two ways (--bytes against --seconds), telling its MP4 facts, fetching the rest,
# proving the cached bytes equal the original, and exporting a fast-start copy.
set -euo pipefail
VCACHE=${1:?usage: demo.sh PATH-TO-VCACHE}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/nginx-origin.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/vcache-demo-XXXXXX")
trap 'stop_origin; rm -rf "$work"' EXIT
mkdir -p "$work/www"
cp "$here/../Fixtures/moov-at-end.mp4" "$work/www/video.mp4"
cp "$here/../Fixtures/moov-at-end.mp4" "$work/www/same-video.mp4"
export VCACHE_DIR="$work/cache" NO_COLOR=1

if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold= plain=; fi
step() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }
vc() { printf '$ vcache %s\n' "$*"; "$VCACHE" "$@"; }

start_origin "$work/nginx" "$work/www"
URL="http://127.0.0.1:$ORIGIN_PORT/video.mp4"
step "A local origin: nginx on 127.0.0.1:$ORIGIN_PORT serving a real 10 s H.264/AAC MP4 ($(wc -c <"$work/www/video.mp4") bytes)"
echo "cache directory: $VCACHE_DIR"

step "1. Warm it for playback: a blind 256 KiB head, against exactly what the first 2 seconds need"
echo "(its moov, the index a player needs first, sits at the end of the file)"
vc prefetch "$URL" --bytes 256K
vc prefetch "${URL%/video.mp4}/same-video.mp4" --seconds 2
vc ls

step "2. What vcache knows of it as an MP4"
vc info "${URL%/video.mp4}/same-video.mp4" | sed -n '/^mp4 layout/,$p'

step "3. Fetch the rest: only the missing bytes are requested"
vc prefetch "$URL"
vc ls

step "4. Run it again: nothing is downloaded twice"
vc prefetch "$URL"

step "5. The cached bytes are the origin's bytes"
key=$("$VCACHE" ls --json | sed -n 's/.*"key":"\([0-9a-f]*\)".*/\1/p' | head -1)
origin_sum=$(sha256sum "$work/www/video.mp4" | cut -d' ' -f1)
cache_sum=$(sha256sum "$VCACHE_DIR/entries/${key:0:2}/$key/data" | cut -d' ' -f1)
printf '  origin  %s\n  cache   %s\n' "$origin_sum" "$cache_sum"
[ "$origin_sum" = "$cache_sum" ] && echo "  identical" || { echo "  DIFFERENT"; exit 1; }

step "6. Check it and hand it on: verify, then export a fast-start copy"
vc verify
vc export "$URL" "$work/exported.mp4" --faststart
printf '  ffmpeg decodes it: %s\n' "$(ffmpeg -v error -i "$work/exported.mp4" -f null - 2>&1 | head -1 | grep . || echo 'no error')"
printf '  ffprobe says: %s seconds of %s\n' \
  "$(ffprobe -v error -show_entries format=duration -of csv=p=0 "$work/exported.mp4")" \
  "$(ffprobe -v error -select_streams v:0 -show_entries stream=codec_name,width,height -of csv=p=0 "$work/exported.mp4")"

step "What nginx was asked (--seconds 2: the first 64 KiB, one hop to the moov header, the moov)"
awk '{printf "  %s %s Range: %s -> %s, %s bytes\n", $1, $2, $3, $4, $5}' "$work/nginx/access.log"
echo
echo "Done. Try 'vcache --help' for the rest."
