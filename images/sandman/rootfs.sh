#!/usr/bin/env bash
# Root file system of sandman/sandman: sandman itself to run in a container
# (the runner of compose/workstation.yml, the CI job of compose/dind-ci.yml).
#
#   rootfs.sh DEST         fill directory DEST
#   rootfs.sh --tar FILE   write it as a tar with numeric owners (root, and
#                          1000:1000 on /workspace) whoever runs it
#
# Holds: the sandman binary, libsandman and exactly the shared libraries
# they load (found with ldd on this host, copied at their paths, so the
# image runs what was built here), busybox-static for a shell, the CA
# bundle, users root and sandbox (1000), and the folder that seeds an empty
# engine with sandman/minimal (seed-minimal/). Offline: nothing is downloaded.
#
# Environment:
#   SANDMAN_EXE   the sandman binary (set by `sandman image build` to
#                 itself; default build/sandman in the source tree)
#   BUSYBOX       busybox-static binary (default /bin/busybox)
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SRC_ROOT=$(cd "$HERE/../.." && pwd)
SANDMAN_EXE=${SANDMAN_EXE:-$SRC_ROOT/build/sandman}
BUSYBOX=${BUSYBOX:-/bin/busybox}

die() { printf 'rootfs.sh (sandman): error: %s\n' "$*" >&2; exit 1; }
usage() { echo "usage: $0 DEST | --tar FILE" >&2; exit 2; }

# Copies a file to the same path under dest, resolving symbolic links in
# the file itself but keeping the name the loader looks for.
copy_at_path() {
  local src=$1 dest=$2
  mkdir -p "$dest$(dirname "$src")"
  cp -L "$src" "$dest$src"
}

populate() {
  local dest=$1 lib
  [ -x "$SANDMAN_EXE" ] || die "$SANDMAN_EXE not found: build sandman first (scripts/setup.sh)"
  [ -x "$BUSYBOX" ] || die "$BUSYBOX not found (apt-get install busybox-static)"
  if ldd "$BUSYBOX" >/dev/null 2>&1; then die "$BUSYBOX is dynamically linked; install busybox-static"; fi
  mkdir -p "$dest"
  chmod 0755 "$dest"
  (cd "$dest" && mkdir -p bin sbin usr/bin usr/sbin usr/local/bin usr/lib etc root tmp var/tmp \
    workspace proc sys dev run/sandman home/sandbox etc/ssl/certs)

  install -m 0755 "$SANDMAN_EXE" "$dest/usr/local/bin/sandman"
  # Every library the binary loads, libsandman included: ldd prints
  # "name => /path (addr)" or "/lib64/ld-linux-x86-64.so.2 (addr)".
  local libs
  libs=$(ldd "$SANDMAN_EXE" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u)
  [ -n "$libs" ] || die "ldd found no libraries for $SANDMAN_EXE"
  for lib in $libs; do
    case "$lib" in
      */libsandman.so*)
        # From the build tree: into the loader's default directory.
        local multiarch
        multiarch=$(dirname "$(ldd "$SANDMAN_EXE" | awk '/libc\.so/ { print $3 }')")
        mkdir -p "$dest$multiarch"
        cp -L "$lib" "$dest$multiarch/$(basename "$lib")"
        ;;
      *) copy_at_path "$lib" "$dest" ;;
    esac
  done
  install -m 0755 "$BUSYBOX" "$dest/bin/busybox"
  local applet
  while IFS= read -r applet; do
    [ -n "$applet" ] && [ "$applet" != "bin/busybox" ] || continue
    [ -e "$dest/$applet" ] || [ -L "$dest/$applet" ] && continue
    mkdir -p "$dest/$(dirname "$applet")"
    ln -s /bin/busybox "$dest/$applet"
  done < <("$BUSYBOX" --list-full)
  [ -e "$dest/bin/sh" ] || ln -s /bin/busybox "$dest/bin/sh"

  # The folder a CI job uses to seed an empty engine with sandman/minimal:
  # `sandman image build minimal` finds it beside /usr/local/bin/sandman.
  mkdir -p "$dest/usr/local/share/sandman/images/minimal"
  install -m 0644 "$HERE/seed-minimal/Dockerfile" "$dest/usr/local/share/sandman/images/minimal/Dockerfile"
  install -m 0755 "$HERE/seed-minimal/rootfs.sh" "$dest/usr/local/share/sandman/images/minimal/rootfs.sh"

  if [ -r /etc/ssl/certs/ca-certificates.crt ]; then
    cp -L /etc/ssl/certs/ca-certificates.crt "$dest/etc/ssl/certs/ca-certificates.crt"
  fi
  cat >"$dest/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
sandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
PASSWD
  cat >"$dest/etc/group" <<'GROUP'
root:x:0:
sandbox:x:1000:
nogroup:x:65534:
GROUP
  printf 'hosts: files dns\n' >"$dest/etc/nsswitch.conf"
  printf '127.0.0.1\tlocalhost\n' >"$dest/etc/hosts"
  : >"$dest/etc/resolv.conf"
  chmod 0700 "$dest/root"
  chmod 1777 "$dest/tmp" "$dest/var/tmp"
  if [ "$(id -u)" -eq 0 ]; then
    chown -hR 0:0 "$dest"
    chown 1000:1000 "$dest/workspace" "$dest/home/sandbox"
  fi
}

pack() {
  local out=$1 tmp
  tmp=$(mktemp -d)
  # shellcheck disable=SC2064
  trap "rm -rf '$tmp'" EXIT
  populate "$tmp/rootfs"
  local common=(--sort=name --numeric-owner -C "$tmp/rootfs")
  tar "${common[@]}" --owner=0 --group=0 --exclude=./workspace --exclude=./home/sandbox \
    -cf "$out.part" .
  tar "${common[@]}" --owner=1000 --group=1000 -rf "$out.part" ./workspace ./home/sandbox
  mv -f "$out.part" "$out"
}

[ $# -ge 1 ] || usage
case "$1" in
  --tar) [ $# -eq 2 ] || usage; pack "$2" ;;
  -h | --help | -*) usage ;;
  *) [ $# -eq 1 ] || usage; populate "$1" ;;
esac
