#!/usr/bin/env bash
# The images the tests use besides sandman/minimal (which scripts/setup.sh
# builds): built from images/NAME under the tests' own tag
# sandman-test/NAME:<inputs hash>, never under a user's sandman/NAME:latest.
# The tag names a hash of everything the image is made from, so a test run
# reuses the image of an earlier run while nothing changed and builds a new
# one when something did; two checkouts with different images/ never share
# a tag.
#
#   scripts/test-images.sh tag NAME...      the tags (no engine call)
#   scripts/test-images.sh ensure NAME...   build what is missing; the tags
#   scripts/test-images.sh provided         every image the set-up and this
#                                           script provide (one a line)
#   scripts/test-images.sh prune [DAYS]     remove sandman-test/* images of
#                                           other inputs not used for DAYS (7)
#
# NAME is a folder of images/ that tests use: general (Debian minbase,
# python3, git: debootstrap the first time, then a cached root file system)
# and dind (the swarm tests' engines). One build per tag at a time, even
# from concurrent test runs (a lock in /tmp).
#
# Environment (optional): SANDMAN_BIN (the sandman that builds; build/sandman),
# SANDMAN_IMAGE_CACHE (the root file system cache; build/image-cache),
# SANDMAN_TEST_IMAGES_REPO (sandman-test), SANDMAN_DEBIAN_MIRROR and
# SANDMAN_DEBIAN_SUITE (as images/general/rootfs.sh reads them).
set -euo pipefail

SM_SCRIPT=test-images
# shellcheck source=lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

REPO=${SANDMAN_TEST_IMAGES_REPO:-sandman-test}
SANDMAN=${SANDMAN_BIN:-$SM_ROOT/build/sandman}
export SANDMAN_IMAGE_CACHE=${SANDMAN_IMAGE_CACHE:-$SM_ROOT/build/image-cache}
KNOWN="general dind"
INPUTS_LABEL=io.sandman.image-inputs
NAME_LABEL=io.sandman.test-image
STAMPS=${TMPDIR:-/tmp}/sandman-test-images
CTX=""
trap '[ -z "$CTX" ] || rm -rf "$CTX"' EXIT

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
}

known() { case " $KNOWN " in *" $1 "*) return 0 ;; esac; return 1; }

# Everything an image is made from: its folder, the root file system script
# they all share (dind's rootfs.sh runs general's), and what of the host
# debootstrap reads (the apt sources, the architecture, the overrides).
inputs_hash() {
  local name=$1 f
  {
    (cd "$SM_ROOT/images" && find "$name" general/rootfs.sh -type f | LC_ALL=C sort -u |
      while read -r f; do printf '%s %s\n' "$f" "$(sm_sha256 "$f")"; done)
    cat /etc/apt/sources.list /etc/apt/sources.list.d/* 2>/dev/null | sha256sum
    dpkg --print-architecture 2>/dev/null || uname -m
    printf '%s|%s\n' "${SANDMAN_DEBIAN_MIRROR:-}" "${SANDMAN_DEBIAN_SUITE:-}"
  } | sha256sum | cut -d' ' -f1
}

tag_of() { printf '%s/%s:%s\n' "$REPO" "$1" "$(inputs_hash "$1" | cut -c1-16)"; }

image_inputs() {
  docker image inspect -f "{{ index .Config.Labels \"$INPUTS_LABEL\" }}" "$1" 2>/dev/null || true
}

# build NAME TAG WANT: the folder's context with its root file system made
# here and the two labels appended to its Dockerfile, built by sandman.
build() {
  local name=$1 tag=$2 want=$3 ctx log
  CTX=$(mktemp -d "${TMPDIR:-/tmp}/sm-test-image.XXXXXX")
  ctx=$CTX/context
  log=$CTX/build.log
  mkdir "$ctx"
  (cd "$SM_ROOT/images/$name" && find . -mindepth 1 -maxdepth 1 ! -name rootfs.sh -exec cp -a {} "$ctx/" \;)
  if [ -x "$SM_ROOT/images/$name/rootfs.sh" ]; then
    "$SM_ROOT/images/$name/rootfs.sh" --tar "$ctx/rootfs.tar" >"$log" 2>&1 || {
      tail -n 20 "$log" | sed 's/^/    /' >&2
      die "images/$name/rootfs.sh failed (log above)"
    }
  fi
  printf 'LABEL %s="%s" %s="%s"\n' "$INPUTS_LABEL" "$want" "$NAME_LABEL" "$name" >>"$ctx/Dockerfile"
  "$SANDMAN" image build "$ctx" --tag "$tag" >>"$log" 2>&1 || {
    tail -n 20 "$log" | sed 's/^/    /' >&2
    die "building $tag from images/$name failed (log above)"
  }
  rm -rf "$CTX"
  CTX=""
}

# ensure NAME: prints the tag once an image with this inputs hash is there.
ensure() {
  local name=$1 tag want start
  known "$name" || die "no test image '$name' (known: $KNOWN)"
  want=sha256:$(inputs_hash "$name")
  tag=$REPO/$name:${want:7:16}
  mkdir -p "$STAMPS"
  if [ "$(image_inputs "$tag")" != "$want" ]; then
    exec 7>"$STAMPS/${tag//[\/:]/_}.lock"
    flock -w 1800 7 || die "waited 30 minutes for another build of $tag"
    if [ "$(image_inputs "$tag")" != "$want" ]; then
      start=$(date +%s)
      echo "test-images: building $tag from images/$name (the first time on this engine takes minutes)" >&2
      build "$name" "$tag" "$want"
      [ "$(image_inputs "$tag")" = "$want" ] || die "built $tag but its $INPUTS_LABEL label is not $want"
      echo "test-images: built $tag in $(sm_elapsed "$start")" >&2
    fi
    exec 7>&-
  fi
  # When it was last wanted: prune keeps what a run of any checkout used lately.
  touch "$STAMPS/${tag//[\/:]/_}.used"
  printf '%s\n' "$tag"
}

# prune DAYS: sandman-test/* images whose tag no run wanted for DAYS days
# and that are not today's inputs; an image a container uses stays.
prune() {
  local days=${1:-7} keep=" " n tag stamp
  for n in $KNOWN; do keep="$keep$(tag_of "$n") "; done
  docker image ls --filter "label=$NAME_LABEL" --format '{{.Repository}}:{{.Tag}}' |
    while read -r tag; do
      case "$tag" in "$REPO"/*) ;; *) continue ;; esac
      case "$keep" in *" $tag "*) continue ;; esac
      stamp=$STAMPS/${tag//[\/:]/_}.used
      if [ -e "$stamp" ] && [ -n "$(find "$stamp" -mtime -"$days" 2>/dev/null)" ]; then continue; fi
      docker image rm "$tag" >/dev/null 2>&1 && echo "test-images: removed $tag"
      rm -f "$stamp"
    done
}

[ $# -ge 1 ] || usage
cmd=$1
shift
case "$cmd" in
  tag) [ $# -ge 1 ] || usage; for n in "$@"; do known "$n" || die "no test image '$n'"; tag_of "$n"; done ;;
  ensure) [ $# -ge 1 ] || usage; for n in "$@"; do ensure "$n"; done ;;
  provided) printf '%s\n' $SM_SETUP_IMAGES; for n in $KNOWN; do tag_of "$n"; done ;;
  prune) prune "$@" ;;
  -h | --help) usage ;;
  *) usage ;;
esac
