#!/usr/bin/env bash
# Makes small HLS test streams (4 s, 160x90/320x180, 2 s segments) into the folder given as $1:
#   ts/index.m3u8       TS VOD
#   fmp4/index.m3u8     fMP4 VOD with EXT-X-MAP (init.mp4)
#   br/index.m3u8       one file, EXT-X-BYTERANGE with explicit offsets (-hls_flags single_file)
#   br/implicit.m3u8    the same, every offset after the first deleted (RFC 8216 §4.3.2.2 implicit offsets)
#   abr/master.m3u8     two variants (90p, 180p) and a separate audio rendition (agroup "aud", DEFAULT=YES, en)
#   aes/index.m3u8      TS VOD encrypted with AES-128 (enc.key, an explicit IV)
# Needs ffmpeg and openssl; the command lines are the ones of /work/shared/HLS-NOTES.md, made smaller.
# Nothing is committed from it: tests run it into a temp dir.
set -euo pipefail
out=${1:?usage: make-streams.sh OUTPUT_DIR}
mkdir -p "$out"
cd "$out"
mkdir -p ts fmp4 br abr aes
SRC=(-f lavfi -i testsrc2=size=320x180:rate=25 -f lavfi -i sine=frequency=440:sample_rate=48000 -t 4)
ENC=(-c:v libx264 -preset ultrafast -g 50 -keyint_min 50 -sc_threshold 0 -c:a aac -b:a 64k)
HLS=(-f hls -hls_time 2 -hls_playlist_type vod)
ff() { ffmpeg -nostdin -v error -y "$@"; }

ff "${SRC[@]}" "${ENC[@]}" "${HLS[@]}" -hls_segment_filename 'ts/seg_%03d.ts' ts/index.m3u8

ff "${SRC[@]}" "${ENC[@]}" "${HLS[@]}" -hls_segment_type fmp4 -hls_fmp4_init_filename init.mp4 \
  -hls_segment_filename 'fmp4/seg_%03d.m4s' fmp4/index.m3u8

ff "${SRC[@]}" "${ENC[@]}" "${HLS[@]}" -hls_flags single_file br/index.m3u8
# ffmpeg always writes n@o: keep the first offset, drop the others.
awk '/^#EXT-X-BYTERANGE:/ { if (seen++) sub(/@[0-9]+/, "") } { print }' br/index.m3u8 > br/implicit.m3u8

ff "${SRC[@]}" -map 0:v -map 0:v -map 1:a -c:v libx264 -preset ultrafast -g 50 -keyint_min 50 -sc_threshold 0 \
  -filter:v:0 scale=-2:90 -b:v:0 100k -filter:v:1 scale=-2:180 -b:v:1 300k -c:a aac -b:a 64k \
  "${HLS[@]}" -hls_segment_type fmp4 \
  -var_stream_map "v:0,agroup:aud,name:90p v:1,agroup:aud,name:180p a:0,agroup:aud,name:audio,default:yes,language:en" \
  -master_pl_name master.m3u8 -hls_segment_filename 'abr/%v/seg_%03d.m4s' abr/%v/index.m3u8

openssl rand 16 > aes/enc.key
printf 'enc.key\naes/enc.key\n%s\n' "$(openssl rand -hex 16)" > aes/keyinfo.txt
ff "${SRC[@]}" "${ENC[@]}" "${HLS[@]}" -hls_key_info_file aes/keyinfo.txt -hls_segment_filename 'aes/seg_%03d.ts' aes/index.m3u8
