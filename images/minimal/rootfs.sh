#!/usr/bin/env bash
# Populates the root file system of sandman/minimal from busybox-static.
#
#   rootfs.sh DEST         fill directory DEST (owners set when run as root)
#   rootfs.sh --tar FILE   write the root file system as an uncompressed tar
#                          with the final owners (root:root, /workspace
#                          1000:1000) whoever runs it; the Dockerfile ADDs it
#
# BUSYBOX overrides the binary (default /bin/busybox). Offline: nothing is
# downloaded. The output depends only on this script and the busybox binary.
set -euo pipefail

BUSYBOX=${BUSYBOX:-/bin/busybox}
SANDBOX_UID=1000
SANDBOX_GID=1000

usage() { echo "usage: $0 DEST | --tar FILE" >&2; exit 2; }

check_busybox() {
  [ -x "$BUSYBOX" ] || { echo "rootfs.sh: $BUSYBOX not found (apt-get install busybox-static)" >&2; exit 1; }
  # A dynamically linked busybox would need a libc in the image.
  if ldd "$BUSYBOX" >/dev/null 2>&1; then
    echo "rootfs.sh: $BUSYBOX is dynamically linked; install busybox-static" >&2
    exit 1
  fi
}

populate() {
  local dest=$1 applet
  mkdir -p "$dest"
  chmod 0755 "$dest"
  (cd "$dest" && mkdir -p bin sbin usr/bin usr/sbin usr/local/bin etc root tmp var/tmp \
    workspace proc sys dev home)
  install -m 0755 "$BUSYBOX" "$dest/bin/busybox"
  # One symlink per applet at the path busybox itself lists (bin/sh, usr/bin/env...).
  while IFS= read -r applet; do
    if [ -z "$applet" ] || [ "$applet" = bin/busybox ]; then continue; fi
    mkdir -p "$dest/$(dirname "$applet")"
    ln -sfn /bin/busybox "$dest/$applet"
  done < <("$BUSYBOX" --list-full)
  [ -e "$dest/bin/sh" ] || ln -s /bin/busybox "$dest/bin/sh"

  cat >"$dest/etc/passwd" <<PASSWD
root:x:0:0:root:/root:/bin/sh
sandbox:x:$SANDBOX_UID:$SANDBOX_GID:sandbox:/workspace:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
PASSWD
  cat >"$dest/etc/group" <<GROUP
root:x:0:
sandbox:x:$SANDBOX_GID:
nogroup:x:65534:
GROUP
  printf 'hosts: files dns\n' >"$dest/etc/nsswitch.conf"
  : >"$dest/etc/hosts"
  : >"$dest/etc/resolv.conf"
  chmod 0644 "$dest/etc/passwd" "$dest/etc/group" "$dest/etc/nsswitch.conf"
  chmod 0700 "$dest/root"
  chmod 1777 "$dest/tmp" "$dest/var/tmp"
  chmod 0755 "$dest/workspace"
  if [ "$(id -u)" -eq 0 ]; then
    chown -hR 0:0 "$dest"
    chown "$SANDBOX_UID:$SANDBOX_GID" "$dest/workspace"
  fi
}

# Owners are written into the tar explicitly so the result does not depend
# on who ran the script; names sorted and times zeroed so it is reproducible.
pack() {
  local out=$1
  PACK_TMP=$(mktemp -d)
  trap 'rm -rf "$PACK_TMP"' EXIT
  local tmp=$PACK_TMP
  populate "$tmp/rootfs"
  local common=(--sort=name --mtime=@0 --numeric-owner --format=gnu -C "$tmp/rootfs")
  tar "${common[@]}" --owner=0 --group=0 --exclude=./workspace -cf "$out.part" .
  tar "${common[@]}" --owner="$SANDBOX_UID" --group="$SANDBOX_GID" -rf "$out.part" ./workspace
  mv -f "$out.part" "$out"
}

[ $# -ge 1 ] || usage
check_busybox
case "$1" in
  --tar) [ $# -eq 2 ] || usage; pack "$2" ;;
  -h | --help) usage ;;
  -*) usage ;;
  *) [ $# -eq 1 ] || usage; populate "$1" ;;
esac
