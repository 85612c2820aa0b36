#!/usr/bin/env bash
# Makes small DASH test streams (6 s, 2 s segments) into the folder given as $1, with the
# command lines of /work/shared/DASH-NOTES.md §5, made smaller:
#   num/manifest.mpd    SegmentTemplate with $Number$ and @duration
#   tl/manifest.mpd     SegmentTemplate with a SegmentTimeline ($Time$ not used by ffmpeg: $Number$ + timeline)
#   list/manifest.mpd   SegmentList (-use_template 0), startNumber set to 0 (ffmpeg's dashdec needs it)
#   sb/manifest.mpd     one file per Representation, SegmentBase with @indexRange on its sidx
#   multi/manifest.mpd  two video Representations (90p, 180p) and two audio AdaptationSets (eng, fra)
# Needs ffmpeg, ffprobe and python3. Nothing is committed from it: tests run it into a temp dir.
set -euo pipefail
out=${1:?usage: make-streams.sh OUTPUT_DIR}
mkdir -p "$out"
cd "$out"
mkdir -p num tl list sb multi
SRC=(-f lavfi -i testsrc2=size=320x180:rate=25 -f lavfi -i sine=frequency=440:sample_rate=48000 -t 6)
ENC=(-map 0:v -map 1:a -c:v libx264 -preset ultrafast -g 50 -keyint_min 50 -sc_threshold 0 -b:v 300k -c:a aac -b:a 64k)
ff() { ffmpeg -nostdin -v error -y "$@"; }

ff "${SRC[@]}" "${ENC[@]}" -f dash -seg_duration 2 -use_template 1 -use_timeline 0 num/manifest.mpd
ff "${SRC[@]}" "${ENC[@]}" -f dash -seg_duration 2 tl/manifest.mpd
ff "${SRC[@]}" "${ENC[@]}" -f dash -seg_duration 2 -use_template 0 list/manifest.mpd
sed -i 's/startNumber="1"/startNumber="0"/' list/manifest.mpd
ff "${SRC[@]}" "${ENC[@]}" -f dash -seg_duration 2 -single_file 1 -global_sidx 1 sb/manifest.mpd
ff -f lavfi -i testsrc2=size=320x180:rate=25 -f lavfi -i sine=frequency=440:sample_rate=48000 \
  -f lavfi -i sine=frequency=660:sample_rate=48000 -t 6 -map 0:v -map 0:v -map 1:a -map 2:a \
  -c:v libx264 -preset ultrafast -g 50 -keyint_min 50 -sc_threshold 0 -s:v:0 320x180 -b:v:0 300k \
  -s:v:1 160x90 -b:v:1 100k -c:a aac -b:a 64k -metadata:s:a:0 language=eng -metadata:s:a:1 language=fra \
  -adaptation_sets "id=0,streams=v id=1,streams=2 id=2,streams=3" -seg_duration 2 -f dash multi/manifest.mpd

# SegmentBase: each single file's SegmentList becomes <SegmentBase indexRange="S-E"><Initialization range="0-M"/>,
# offsets from ffprobe's trace of its top-level boxes (the box starts 8 bytes before the offset it prints).
python3 - sb <<'PY'
import re, subprocess, sys, os
d = sys.argv[1]
mpd = open(os.path.join(d, "manifest.mpd")).read()
def boxes(f):
    t = subprocess.run(["ffprobe", "-v", "trace", os.path.join(d, f)], capture_output=True, text=True).stderr
    out = []
    for m in re.finditer(r"type:'(\w+)' parent:'root' sz: (\d+) (\d+)", t):
        out.append((m.group(1), int(m.group(3)) - 8, int(m.group(2))))
    return out
def replace(m):
    rep = m.group(0)
    f = re.search(r"<BaseURL>([^<]+)</BaseURL>", rep) or re.search(r'sourceURL="([^"]+)"', rep)
    b = boxes(f.group(1))
    moov = next(x for x in b if x[0] == "moov")
    sidx = next(x for x in b if x[0] == "sidx")
    if "<BaseURL>" not in rep:
        rep = rep.replace(">", ">\n\t\t\t\t<BaseURL>%s</BaseURL>" % f.group(1), 1)
    seg = '<SegmentBase indexRange="%d-%d"><Initialization range="0-%d"/></SegmentBase>' % (sidx[1], sidx[1] + sidx[2] - 1, moov[1] + moov[2] - 1)
    return re.sub(r"<SegmentList.*?</SegmentList>", seg, rep, flags=re.S)
mpd = re.sub(r"<Representation.*?</Representation>", replace, mpd, flags=re.S)
open(os.path.join(d, "manifest.mpd"), "w").write(mpd)
PY
