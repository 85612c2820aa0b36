#!/usr/bin/env bash
# make deb: a Debian package of the release binary, its man page and completions, with Depends
# computed from the libraries the binary links (each mapped to its Debian package with dpkg -S).
# Needs dpkg-deb and readelf (binutils).
set -euo pipefail
bin=${1:?usage: deb.sh PATH-TO-RELEASE-VCACHE OUT-DIR}
out=${2:?usage: deb.sh PATH-TO-RELEASE-VCACHE OUT-DIR}
top=$(cd "$(dirname "$0")/../.." && pwd)
stage=$(mktemp -d "${TMPDIR:-/tmp}/vcache-deb-XXXXXX")
trap 'rm -rf "$stage"' EXIT
make -s -C "$top" install-files BIN="$bin" DESTDIR="$stage/root" PREFIX=/usr >/dev/null
version=$("$bin" --version | head -1 | awk '{print $2}')
arch=$(dpkg --print-architecture)
# Only the libraries the binary itself names (NEEDED), not what they pull in.
needed=$(readelf -d "$bin" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p')
deps=$(for n in $needed; do ldd "$bin" | awk -v n="$n" '$1 == n {print $3}'; done | while read -r lib; do
  for p in "$lib" "$(readlink -f "$lib")" "/usr$lib"; do
    pkg=$(dpkg -S "$p" 2>/dev/null | head -1 | cut -d: -f1) && [ -n "$pkg" ] && { echo "$pkg"; break; }
  done
done | sort -u | paste -sd, - | sed 's/,/, /g')
mkdir -p "$stage/root/DEBIAN" "$stage/root/usr/share/doc/vcache"
cat > "$stage/root/usr/share/doc/vcache/copyright" <<COPY
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: vcache
Files: *
Copyright: the vcache developers
License: see the project's repository
COPY
gzip -9n -c "$stage/root/usr/share/man/man1/vcache.1" > "$stage/root/usr/share/man/man1/vcache.1.gz"
rm "$stage/root/usr/share/man/man1/vcache.1"
size=$(du -sk "$stage/root/usr" | cut -f1)
cat > "$stage/root/DEBIAN/control" <<CONTROL
Package: vcache
Version: $version
Architecture: $arch
Maintainer: vcache developers <vcache@localhost>
Installed-Size: $size
Depends: $deps
Section: video
Priority: optional
Description: sparse-range cache for MP4 over HTTP, with a local proxy for players
 vcache fetches byte ranges of videos into a crash-safe cache, resumes where it
 stopped, keeps the cache under a size cap, knows where an MP4's index is
 (--seconds), exports complete files and serves players through a local proxy.
CONTROL
mkdir -p "$out"
dpkg-deb --root-owner-group -Zxz --build "$stage/root" "$out/vcache_${version}_${arch}.deb" >/dev/null
echo "$out/vcache_${version}_${arch}.deb"
echo "Depends: $deps"
