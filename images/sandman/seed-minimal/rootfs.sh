#!/bin/sh
# The default sandbox image (sandman/minimal) made from the busybox of the
# sandman/sandman container itself: POSIX sh and busybox only, so a CI job
# in that container can seed an empty docker-in-docker engine offline with
#   sandman image build minimal
# (the sandman image installs this folder as /usr/local/share/sandman/images/minimal,
# which sandman finds beside its binary). Same result as images/minimal.
#
#   rootfs.sh DEST | --tar FILE
set -eu

BUSYBOX=${BUSYBOX:-/bin/busybox}

usage() { echo "usage: $0 DEST | --tar FILE" >&2; exit 2; }

populate() {
  dest=$1
  [ -x "$BUSYBOX" ] || { echo "rootfs.sh: $BUSYBOX not found" >&2; exit 1; }
  mkdir -p "$dest"
  for d in bin sbin usr/bin usr/sbin usr/local/bin etc root tmp var/tmp workspace proc sys dev home; do
    mkdir -p "$dest/$d"
  done
  cp "$BUSYBOX" "$dest/bin/busybox"
  chmod 0755 "$dest/bin/busybox"
  "$BUSYBOX" --list-full | while IFS= read -r applet; do
    [ -n "$applet" ] && [ "$applet" != bin/busybox ] || continue
    mkdir -p "$dest/$(dirname "$applet")"
    ln -sf /bin/busybox "$dest/$applet"
  done
  [ -e "$dest/bin/sh" ] || ln -s /bin/busybox "$dest/bin/sh"
  cat >"$dest/etc/passwd" <<'PASSWD'
root:x:0:0:root:/root:/bin/sh
sandbox:x:1000:1000:sandbox:/workspace:/bin/sh
nobody:x:65534:65534:nobody:/nonexistent:/bin/false
PASSWD
  cat >"$dest/etc/group" <<'GROUP'
root:x:0:
sandbox:x:1000:
nogroup:x:65534:
GROUP
  printf 'hosts: files dns\n' >"$dest/etc/nsswitch.conf"
  : >"$dest/etc/hosts"
  : >"$dest/etc/resolv.conf"
  chmod 0700 "$dest/root"
  chmod 1777 "$dest/tmp" "$dest/var/tmp"
  chmod 0755 "$dest/workspace"
  if [ "$(id -u)" -eq 0 ]; then
    chown -hR 0:0 "$dest"
    chown 1000:1000 "$dest/workspace"
  fi
}

[ $# -ge 1 ] || usage
case "$1" in
  --tar)
    [ $# -eq 2 ] || usage
    tmp=$(mktemp -d)
    trap 'rm -rf "$tmp"' EXIT
    populate "$tmp/rootfs"
    tar -cf "$2.part" -C "$tmp/rootfs" .
    mv -f "$2.part" "$2"
    ;;
  -*) usage ;;
  *) [ $# -eq 1 ] || usage; populate "$1" ;;
esac
