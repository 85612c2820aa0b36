#!/usr/bin/env bash
# make demo: a local origin (nginx) serving a real MP4, then vcache warming its head, fetching
# the rest, listing the cache, and proving the cached bytes equal the original.
set -euo pipefail
VCACHE=${1:?usage: demo.sh PATH-TO-VCACHE}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/nginx-origin.sh"
work=$(mktemp -d "${TMPDIR:-/tmp}/vcache-demo-XXXXXX")
trap 'stop_origin; rm -rf "$work"' EXIT
mkdir -p "$work/www"
cp "$here/../Fixtures/moov-at-end.mp4" "$work/www/video.mp4"
export VCACHE_DIR="$work/cache" NO_COLOR=1

if [ -t 1 ]; then bold=$'\033[1m' plain=$'\033[0m'; else bold= plain=; fi
step() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain"; }
vc() { printf '$ vcache %s\n' "$*"; "$VCACHE" "$@"; }

start_origin "$work/nginx" "$work/www"
URL="http://127.0.0.1:$ORIGIN_PORT/video.mp4"
step "A local origin: nginx on 127.0.0.1:$ORIGIN_PORT serving a real 10 s H.264/AAC MP4 ($(wc -c <"$work/www/video.mp4") bytes)"
echo "cache directory: $VCACHE_DIR"

step "1. Warm the head so playback could start at once"
vc prefetch "$URL" --bytes 64K
vc ls

step "2. Fetch the rest: only the missing bytes are requested"
vc prefetch "$URL"
vc ls

step "3. Run it again: nothing is downloaded twice"
vc prefetch "$URL"

step "4. The cached bytes are the origin's bytes"
key=$("$VCACHE" ls --json | sed -n 's/.*"key":"\([0-9a-f]*\)".*/\1/p' | head -1)
origin_sum=$(sha256sum "$work/www/video.mp4" | cut -d' ' -f1)
cache_sum=$(sha256sum "$VCACHE_DIR/entries/${key:0:2}/$key/data" | cut -d' ' -f1)
printf '  origin  %s\n  cache   %s\n' "$origin_sum" "$cache_sum"
[ "$origin_sum" = "$cache_sum" ] && echo "  identical" || { echo "  DIFFERENT"; exit 1; }

step "5. Check it and hand it on: verify, then export a playable file"
vc verify
vc export "$URL" "$work/exported.mp4"
printf '  ffprobe says: %s seconds of %s\n' \
  "$(ffprobe -v error -show_entries format=duration -of csv=p=0 "$work/exported.mp4")" \
  "$(ffprobe -v error -select_streams v:0 -show_entries stream=codec_name,width,height -of csv=p=0 "$work/exported.mp4")"

step "What nginx was asked (one ranged GET per missing span)"
awk '{printf "  %s %s Range: %s -> %s, %s bytes\n", $1, $2, $3, $4, $5}' "$work/nginx/access.log"
echo
echo "Done. Try 'vcache --help' for the rest."
