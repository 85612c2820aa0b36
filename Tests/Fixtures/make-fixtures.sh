#!/usr/bin/env bash
# Makes the fixtures that are derived from moov-at-end.mp4 (itself made as README.md says).
# Run from anywhere; needs ffmpeg and python3. The results are committed; rerun only to change them.
set -euo pipefail
cd "$(dirname "$0")"
# A cut that starts between keyframes: `-c copy` keeps the frames the first shown one depends
# on and adds an edit list whose media_time skips them (1.58 s into the media).
ffmpeg -v error -y -ss 1.5 -i moov-at-end.mp4 -c copy -t 5 editlist.mp4
# Fragmented with a segment index (one sidx per track, right after the moov).
ffmpeg -v error -y -i moov-at-end.mp4 -c copy -movflags frag_keyframe+empty_moov+default_base_moof+global_sidx sidx.mp4
# moov-at-front.mp4 with the first track's stsz sample count set to 0x7fffffff: a count whose
# table cannot fit in its box.
python3 - <<'PY'
import struct
b = bytearray(open("moov-at-front.mp4", "rb").read())
i = b.index(b"stsz")            # the first track's sample size box
struct.pack_into(">I", b, i + 12, 0x7fffffff)   # after type, version+flags, sample_size
open("corrupt-moov.mp4", "wb").write(b)
PY
