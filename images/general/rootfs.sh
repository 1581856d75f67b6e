#!/usr/bin/env bash
# Root file system of sandman/general: Debian minbase (debootstrap) with
# bash, coreutils, python3, git and ca-certificates, and for code contexts
# (docs/code.md) a Jupyter kernel (ipykernel, jupyter_client) with numpy,
# pandas and matplotlib, all from Debian's packages; the non-root user
# `sandbox` (uid/gid 1000) and /workspace owned by it.
#
#   rootfs.sh DEST         fill directory DEST (as root)
#   rootfs.sh --tar FILE   write the root file system as a tar (numeric
#                          owners); the Dockerfile ADDs it
#
# Network: only the Debian mirror this machine's apt already uses (first
# entry for the host's release with component main in /etc/apt/sources.list
# or sources.list.d). Nothing else is fetched.
#
# The debootstrap result is cached as a tar under $SANDMAN_IMAGE_CACHE
# (default: build/image-cache in the source tree), keyed by this script, the
# mirror, the suite and the package list, so a rebuild copies a file instead
# of running debootstrap (~1-3 minutes) again, and the engine's build cache
# sees the same bytes.
#
# Environment (optional):
#   SANDMAN_DEBIAN_MIRROR   mirror URL (default: from apt's sources)
#   SANDMAN_DEBIAN_SUITE    suite (default: VERSION_CODENAME of /etc/os-release)
#   SANDMAN_IMAGE_CACHE     cache directory
#   SANDMAN_ROOTFS_FLAVOUR  cache name (default general); SANDMAN_ROOTFS_EXTRA
#                           more packages: images/dind uses both
set -euo pipefail

SELF=$(readlink -f "${BASH_SOURCE[0]}")
HERE=$(dirname "$SELF")
SRC_ROOT=$(cd "$HERE/../.." && pwd)
FLAVOUR=${SANDMAN_ROOTFS_FLAVOUR:-general}
PACKAGES="bash coreutils python3 git make ca-certificates ${SANDMAN_ROOTFS_EXTRA:-}"
# Code contexts' kernel and data packages: sandman/general only (images that
# reuse this script under a flavour of their own, dind, do without them).
# apt installs them in the new root file system after debootstrap: its
# resolver knows virtual packages (python3-zmq needs one) and takes one
# alternative, where debootstrap's takes them all (python3-munkres is named
# so that fonttools' "scipy | munkres" needs no scipy).
CODE_PACKAGES=""
if [ "$FLAVOUR" = general ]; then
  CODE_PACKAGES="python3-ipykernel python3-jupyter-client python3-numpy python3-pandas"
  CODE_PACKAGES="$CODE_PACKAGES python3-matplotlib python3-munkres"
fi
CACHE_DIR=${SANDMAN_IMAGE_CACHE:-$SRC_ROOT/build/image-cache}
SANDBOX_UID=1000
SANDBOX_GID=1000

say() { printf 'rootfs.sh (%s): %s\n' "$FLAVOUR" "$*" >&2; }
die() { printf 'rootfs.sh (%s): error: %s\n' "$FLAVOUR" "$*" >&2; exit 1; }
usage() { echo "usage: $0 DEST | --tar FILE" >&2; exit 2; }

# The suite of this host (bookworm on Debian 12).
host_suite() {
  local codename=""
  [ -r /etc/os-release ] && codename=$(. /etc/os-release && printf '%s' "${VERSION_CODENAME:-}")
  [ -n "$codename" ] || die "cannot tell the Debian release from /etc/os-release; set SANDMAN_DEBIAN_SUITE"
  printf '%s\n' "$codename"
}

# The first apt source for SUITE with component main, in one-line or deb822
# form. Disabled files (not *.list / *.sources) are ignored. POSIX awk (mawk).
apt_mirror() {
  local suite=$1 f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    case "$f" in
      *.sources) awk -v suite="$suite" "$DEB822_AWK" "$f" ;;
      *) awk -v suite="$suite" "$ONELINE_AWK" "$f" ;;
    esac && return 0
  done
  return 1
}

ONELINE_AWK='
  /^[ \t]*deb[ \t]/ {
    line = $0; sub(/^[ \t]*deb[ \t]+/, "", line)
    if (line ~ /^\[/) sub(/^\[[^]]*\][ \t]*/, "", line)
    n = split(line, w, /[ \t]+/)
    if (n >= 3 && w[2] == suite) for (i = 3; i <= n; i++) if (w[i] == "main") { print w[1]; found = 1; exit }
  }
  END { if (!found) exit 1 }'

DEB822_AWK='
  function flush() {
    if (!found && uris != "" && (" " types " ") ~ / deb / && (" " suites " ") ~ (" " suite " ") &&
        (" " comps " ") ~ / main / && enabled != "no") { split(uris, u, /[ \t]+/); print u[1]; found = 1 }
    uris = ""; types = ""; suites = ""; comps = ""; enabled = ""
  }
  /^[ \t]*$/ { flush(); next }
  /^#/ { next }
  {
    key = tolower($1); sub(/:$/, "", key); val = $0; sub(/^[^:]*:[ \t]*/, "", val)
    if (key == "types") types = val
    else if (key == "uris") uris = val
    else if (key == "suites") suites = val
    else if (key == "components") comps = val
    else if (key == "enabled") enabled = tolower(val)
  }
  END { flush(); if (!found) exit 1 }'

# Everything the cached root file system depends on.
cache_key() {
  { sha256sum "$SELF" | cut -d' ' -f1; echo "$MIRROR $SUITE $PACKAGES + $CODE_PACKAGES $(dpkg --print-architecture)"; } |
    sha256sum | cut -c1-16
}

# Users, folders and clean-up on top of debootstrap's result.
finish_rootfs() {
  local r=$1
  grep -q '^sandbox:' "$r/etc/group" ||
    echo "sandbox:x:$SANDBOX_GID:" >>"$r/etc/group"
  grep -q '^sandbox:' "$r/etc/passwd" ||
    echo "sandbox:x:$SANDBOX_UID:$SANDBOX_GID:sandbox:/home/sandbox:/bin/bash" >>"$r/etc/passwd"
  if [ -f "$r/etc/shadow" ] && ! grep -q '^sandbox:' "$r/etc/shadow"; then
    echo "sandbox:!:19000:0:99999:7:::" >>"$r/etc/shadow"
  fi
  mkdir -p "$r/workspace" "$r/home/sandbox"
  chown "$SANDBOX_UID:$SANDBOX_GID" "$r/workspace" "$r/home/sandbox"
  chmod 0755 "$r/workspace" "$r/home/sandbox"
  # The engine provides these at run time; the image must not carry the
  # build host's.
  : >"$r/etc/resolv.conf"
  : >"$r/etc/hostname"
  printf '127.0.0.1\tlocalhost\n' >"$r/etc/hosts"
  # No device nodes (the engine mounts /dev), no package caches, no logs.
  find "$r/dev" -mindepth 1 -delete
  rm -rf "$r/var/cache/apt/archives/"*.deb "$r/var/lib/apt/lists/"* "$r/var/log/"*.log \
    "$r/var/cache/debconf/"*-old "$r/tmp/"* "$r/var/tmp/"*
  rm -f "$r/usr/sbin/policy-rc.d"
  chmod 1777 "$r/tmp" "$r/var/tmp"
}

# CODE_PACKAGES with apt in the root file system r (from the same mirror,
# Recommends left out), then apt's caches emptied.
install_code_packages() {
  local r=$1
  [ -n "$CODE_PACKAGES" ] || return 0
  say "apt-get install --no-install-recommends $CODE_PACKAGES (in the new root file system)"
  cp -f /etc/resolv.conf "$r/etc/resolv.conf" # emptied again by finish_rootfs
  mount -t proc proc "$r/proc"
  local rc=0
  # shellcheck disable=SC2086
  { chroot "$r" env DEBIAN_FRONTEND=noninteractive apt-get update -qq &&
    chroot "$r" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq \
      --no-install-recommends $CODE_PACKAGES; } >"$r/../apt.log" 2>&1 || rc=$?
  umount "$r/proc"
  if [ "$rc" -ne 0 ]; then
    tail -n 20 "$r/../apt.log" | sed 's/^/    /' >&2
    die "apt-get install in the root file system failed (log above)"
  fi
  chroot "$r" apt-get clean
}

build_cache() {
  local out=$1 work
  command -v debootstrap >/dev/null ||
    die "debootstrap is not installed (apt-get install debootstrap)"
  [ "$(id -u)" -eq 0 ] || die "debootstrap needs root"
  mkdir -p "$CACHE_DIR"
  work=$(mktemp -d "$CACHE_DIR/$FLAVOUR-work.XXXXXX")
  # shellcheck disable=SC2064
  trap "cleanup_work '$work'" EXIT
  local include keyring=()
  include=$(printf '%s' "$PACKAGES" | tr -s ' ' ',' | sed 's/^,//; s/,$//')
  [ -r /usr/share/keyrings/debian-archive-keyring.gpg ] &&
    keyring=(--keyring=/usr/share/keyrings/debian-archive-keyring.gpg)
  say "debootstrap --variant=minbase --include=$include $SUITE from $MIRROR (takes a minute or more)"
  if ! debootstrap --variant=minbase --components=main --include="$include" "${keyring[@]}" \
    "$SUITE" "$work/rootfs" "$MIRROR" >"$work/debootstrap.log" 2>&1; then
    tail -n 20 "$work/debootstrap.log" | sed 's/^/    /' >&2
    [ -f "$work/rootfs/debootstrap/debootstrap.log" ] &&
      tail -n 20 "$work/rootfs/debootstrap/debootstrap.log" | sed 's/^/    /' >&2
    die "debootstrap failed (log above)"
  fi
  install_code_packages "$work/rootfs"
  finish_rootfs "$work/rootfs"
  # Sorted names, numeric owners: the same tree gives the same bytes.
  tar --sort=name --numeric-owner -C "$work/rootfs" -cf "$work/rootfs.tar" .
  mv -f "$work/rootfs.tar" "$out"
  say "cached $(du -h "$out" | cut -f1) as $out"
}

# debootstrap may leave /proc or /sys mounted in the target when it fails.
cleanup_work() {
  local w=$1 m
  for m in proc sys dev/pts; do
    mountpoint -q "$w/rootfs/$m" 2>/dev/null && umount -l "$w/rootfs/$m" 2>/dev/null
  done
  rm -rf --one-file-system "$w"
}

[ $# -ge 1 ] || usage
case "$1" in
  --tar) [ $# -eq 2 ] || usage ;;
  -h | --help | -*) usage ;;
  *) [ $# -eq 1 ] || usage ;;
esac

SUITE=${SANDMAN_DEBIAN_SUITE:-$(host_suite)}
MIRROR=${SANDMAN_DEBIAN_MIRROR:-$(apt_mirror "$SUITE" || true)}
[ -n "$MIRROR" ] ||
  die "no Debian mirror for $SUITE (component main) in /etc/apt/sources.list or sources.list.d; set SANDMAN_DEBIAN_MIRROR"
CACHED=$CACHE_DIR/$FLAVOUR-$SUITE-$(cache_key).tar

mkdir -p "$CACHE_DIR"
# One debootstrap at a time per flavour, even from parallel builds.
exec 8>"$CACHE_DIR/.$FLAVOUR.lock"
flock -w 1800 8 || die "waited 30 minutes for $CACHE_DIR/.$FLAVOUR.lock"
if [ -s "$CACHED" ]; then
  say "using the cached root file system $CACHED"
else
  build_cache "$CACHED"
fi

if [ "$1" = --tar ]; then
  # A hard link when the staging directory is on the same file system.
  ln -f "$CACHED" "$2" 2>/dev/null || cp -f "$CACHED" "$2"
else
  mkdir -p "$1"
  tar --numeric-owner -xpf "$CACHED" -C "$1"
fi
