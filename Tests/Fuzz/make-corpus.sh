#!/usr/bin/env bash
# Makes the fuzzers' seed corpus from the fixtures: each MP4 with every mdat cut to 512 bytes
# (the boxes, moov and moofs stay whole, so the seeds are small but reach the sample tables),
# plus each fixture's first 4 KiB. The results are committed; rerun to change them.
set -euo pipefail
cd "$(dirname "$0")"
rm -rf corpus && mkdir corpus
python3 - <<'PY'
import os, struct
src = "../Fixtures"
for name in sorted(os.listdir(src)):
    if not name.endswith((".mp4", ".mov")): continue
    b = open(os.path.join(src, name), "rb").read()
    out, at = bytearray(), 0
    while at + 8 <= len(b):
        size, typ = struct.unpack(">I4s", b[at:at + 8])
        if size == 0: size = len(b) - at
        if size < 8 or at + size > len(b): out += b[at:at + 4096]; break
        box = b[at:at + size]
        if typ == b"mdat": box = struct.pack(">I4s", 8 + 512, b"mdat") + box[8:8 + 512]
        out += box
        at += size
    base = os.path.splitext(name)[0]
    open(f"corpus/{base}-skeleton", "wb").write(out)
    open(f"corpus/{base}-head", "wb").write(b[:4096])
PY
ls -la corpus
