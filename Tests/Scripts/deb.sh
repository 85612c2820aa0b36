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
# Shipped without debug info (75 MB with it); the build keeps the unstripped binary.
strip --strip-debug --strip-unneeded "$stage/root/usr/bin/vcache"
version=$("$bin" --version | head -1 | awk '{print $2}')
arch=$(dpkg --print-architecture)
# Only the libraries the binary itself names (NEEDED), not what they pull in.
needed=$(readelf -d "$bin" | sed -n 's/.*Shared library: \[\(.*\)\]/\1/p')
deps=$(for n in $needed; do ldd "$bin" | awk -v n="$n" '$1 == n {print $3}'; done | while read -r lib; do
  for p in "$lib" "$(readlink -f "$lib")" "/usr$lib"; do
    pkg=$(dpkg -S "$p" 2>/dev/null | head -1 | cut -d: -f1) && [ -n "$pkg" ] && { echo "$pkg"; break; }
  done
done | sort -u | paste -sd, - | sed 's/,/, /g')
mkdir -p "$stage/root/usr/share/doc/vcache"
cat > "$stage/root/usr/share/doc/vcache/copyright" <<COPY
Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/
Upstream-Name: vcache
Files: *
Copyright: the vcache developers
License: see the project's repository
COPY
# The box setup (Docs/operations.md): the URL list as a conffile, a system user and a cache folder
# shared by its group, the serve unit and the warm-up timer enabled and started as Debian does
# for services (deb-systemd-helper / deb-systemd-invoke, what dh_installsystemd writes).
install -d "$stage/root/etc/vcache"
install -m 0644 "$top/Docs/units/urls.txt" "$stage/root/etc/vcache/urls.txt"
rm -f "$stage/root/usr/share/doc/vcache/urls.txt.example"
mkdir -p "$stage/root/DEBIAN"
echo /etc/vcache/urls.txt > "$stage/root/DEBIAN/conffiles"
cat > "$stage/root/DEBIAN/postinst" <<'SCRIPT'
#!/bin/sh
set -e
if [ "$1" = configure ]; then
  if ! getent passwd vcache >/dev/null; then
    useradd --system --user-group --home-dir /var/cache/vcache --no-create-home \
      --shell /usr/sbin/nologin --comment "vcache video cache" vcache
  fi
  # Group-shared: the set-group-ID bit makes vcache give every file the group's rights, so a
  # warm-up as root or an admin in the vcache group shares the cache with the services.
  install -d -m 2770 -o vcache -g vcache /var/cache/vcache
  chgrp vcache /var/cache/vcache && chmod 2770 /var/cache/vcache
  # An empty cache (its catalog), so that `vcache status` and `ls` answer from the first minute.
  if [ ! -e /var/cache/vcache/catalog.db ]; then
    VCACHE_DIR=/var/cache/vcache /usr/bin/vcache config unset max-size >/dev/null 2>&1 || true
    chown -R vcache:vcache /var/cache/vcache
  fi
  if [ -d /run/systemd/system ]; then systemctl --system daemon-reload >/dev/null || true; fi
  if command -v deb-systemd-helper >/dev/null; then
    for unit in vcache-serve.service vcache-warmup.timer; do
      deb-systemd-helper unmask "$unit" >/dev/null || true
      # was-enabled is true on a first install: enable then; later keep what the admin chose.
      if deb-systemd-helper --quiet was-enabled "$unit"; then deb-systemd-helper enable "$unit" >/dev/null || true
      else deb-systemd-helper update-state "$unit" >/dev/null || true; fi
    done
  fi
  if [ -d /run/systemd/system ] && command -v deb-systemd-invoke >/dev/null; then
    deb-systemd-invoke restart vcache-serve.service >/dev/null || true
    deb-systemd-invoke start vcache-warmup.timer >/dev/null || true
  fi
fi
SCRIPT
cat > "$stage/root/DEBIAN/prerm" <<'SCRIPT'
#!/bin/sh
set -e
if [ -d /run/systemd/system ] && [ "$1" = remove ] && command -v deb-systemd-invoke >/dev/null; then
  deb-systemd-invoke stop vcache-warmup.timer vcache-warmup.service vcache-serve.service >/dev/null || true
fi
SCRIPT
cat > "$stage/root/DEBIAN/postrm" <<'SCRIPT'
#!/bin/sh
set -e
if [ -d /run/systemd/system ]; then systemctl --system daemon-reload >/dev/null || true; fi
if [ "$1" = remove ] && command -v deb-systemd-helper >/dev/null; then
  deb-systemd-helper mask vcache-serve.service vcache-warmup.timer >/dev/null || true
fi
if [ "$1" = purge ]; then
  if command -v deb-systemd-helper >/dev/null; then
    deb-systemd-helper purge vcache-serve.service vcache-warmup.timer >/dev/null || true
    deb-systemd-helper unmask vcache-serve.service vcache-warmup.timer >/dev/null || true
  fi
  # The cache is data this package made; the system user stays (Debian leaves system users).
  rm -rf /var/cache/vcache
fi
SCRIPT
chmod 0755 "$stage/root/DEBIAN/postinst" "$stage/root/DEBIAN/prerm" "$stage/root/DEBIAN/postrm"
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
Recommends: bash-completion
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
