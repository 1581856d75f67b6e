#!/usr/bin/env bash
# Every image folder in images/ builds offline with `sandman image build
# NAME`, and a tool call runs in each; the command's errors are clear.
# docs/images.md describes every folder.
#
# Root file systems made by debootstrap are cached in $SANDMAN_IMAGE_CACHE
# (default: build/image-cache in the source tree, shared by the plain and
# the sanitizer builds), so only the first run on a
# machine pays for debootstrap.
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
require_engine

# One cache for the plain and the sanitizer builds: debootstrap once per machine.
export SANDMAN_IMAGE_CACHE=${SANDMAN_IMAGE_CACHE:-$SRC_DIR/build/image-cache}
WORK=$(mktemp -d)
TEST_TAG=sandman-it/$(printf '%s' "$SANDMAN_INSTANCE" | tr -c 'a-z0-9._-' '-')
cleanup() {
  cleanup_instance
  docker image ls --format '{{.Repository}}:{{.Tag}}' "$TEST_TAG/*" 2>/dev/null |
    xargs -r docker image rm -f >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

# sandman run when this build has it, else the engine directly.
RUN_AVAILABLE=0
if "$SANDMAN" run --help 2>/dev/null | grep -q 'Usage: sandman run'; then RUN_AVAILABLE=1; fi
tool_call() {
  local image=$1; shift
  if [ "$RUN_AVAILABLE" = 1 ]; then
    "$SANDMAN" run --mode per_tool --image "$image" -- "$@"
  else
    docker run --rm --network none --label io.sandman.managed=true \
      --label "io.sandman.instance=$SANDMAN_INSTANCE" "$image" "$@"
  fi
}

# build NAME [ARGS...]: runs `sandman image build` from the source tree (NAME
# found in ./images), keeps stdout (the id) and stderr (progress). Every
# call gives a --tag of this test's; the cleanup removes them all.
build() {
  local name=$1; shift
  (cd "$SRC_DIR" && "$SANDMAN" image build "$name" "$@") >"$WORK/$name.id" 2>"$WORK/$name.log"
}

images=()
for dir in "$SRC_DIR"/images/*/; do
  [ -f "$dir/Dockerfile" ] && images+=("$(basename "$dir")")
done
check "images/ holds minimal, general, sandman and dind" \
  bash -c "[[ ' ${images[*]} ' == *' minimal '* && ' ${images[*]} ' == *' general '* && ' ${images[*]} ' == *' sandman '* && ' ${images[*]} ' == *' dind '* ]]"

for name in "${images[@]}"; do
  # Every folder is built under this test's own tag: sandman/minimal:latest
  # belongs to scripts/setup.sh, the other sandman/*:latest to whoever built
  # them, sandman-test/* to scripts/test-images.sh; a test never replaces them.
  tag=$TEST_TAG/$name:latest
  args=(--tag "$tag")
  if build "$name" "${args[@]}"; then
    it_pass "image build $name"
  else
    it_fail "image build $name: $(tail -n 15 "$WORK/$name.log")"
    continue
  fi
  id=$(cat "$WORK/$name.id")
  expect_eq "image build $name prints the id of $tag" "$(docker image inspect -f '{{.Id}}' "$tag")" "$id"
  expect_contains "image build $name streams the engine's progress" "Successfully tagged $tag" \
    "$(cat "$WORK/$name.log")"
  if [ -f "$SRC_DIR/images/$name/rootfs.sh" ]; then
    expect_contains "image build $name ran its rootfs.sh" "rootfs.sh --tar" "$(cat "$WORK/$name.log")"
  fi

  case "$name" in
    general)
      expect_eq "python3 runs in sandman/general" "2" "$(tool_call "$tag" python3 -c 'print(1+1)' 2>&1)"
      expect_eq "sandman/general runs as sandbox (1000) in /workspace" "1000 /workspace" \
        "$(tool_call "$tag" sh -c 'echo $(id -u) $(pwd)' 2>&1)"
      expect_contains "sandman/general has git and CA certificates" "git version" \
        "$(tool_call "$tag" sh -c 'git --version && test -s /etc/ssl/certs/ca-certificates.crt' 2>&1)"
      expect_contains "sandman/general has bash" "GNU bash" "$(tool_call "$tag" bash --version 2>&1)"
      expect_contains "sandman/general has make (docs/ci.md runs make test in it)" "GNU Make" \
        "$(tool_call "$tag" make --version 2>&1)"
      ;;
    minimal)
      expect_eq "a tool call runs in the minimal folder's image" "ok 1000" \
        "$(tool_call "$tag" sh -c 'echo ok $(id -u)' 2>&1)"
      ;;
    sandman)
      # Not a sandbox image: sandman itself, run as the engine would run it.
      want=$("$SANDMAN" version 2>/dev/null | head -n 1)
      expect_eq "sandman/sandman runs the sandman that built it" "$want" \
        "$(docker run --rm --network none "$tag" version 2>/dev/null | head -n 1)"
      expect_contains "sandman/sandman reaches the engine through its socket" "api" \
        "$(docker run --rm --network none -v "$(it_engine_socket)":/var/run/docker.sock \
          "$tag" version 2>&1)"
      ;;
    dind)
      expect_contains "sandman/dind holds Debian's dockerd" "Docker version" \
        "$(docker run --rm --network none "$tag" dockerd --version 2>&1)"
      expect_contains "sandman/dind holds openssl for its certificates" "OpenSSL" \
        "$(docker run --rm --network none "$tag" openssl version 2>&1)"
      ;;
  esac
done

# A second build reuses the cached root file system instead of debootstrap.
if build general --tag "$TEST_TAG/general:latest"; then
  expect_contains "a rebuild of general uses the cached root file system" \
    "using the cached root file system" "$(cat "$WORK/general.log")"
else
  it_fail "second image build general: $(tail -n 5 "$WORK/general.log")"
fi

# SANDMAN_IMAGES_DIR, a folder without rootfs.sh, --tag.
mkdir -p "$WORK/images/tiny"
printf 'FROM scratch\nCOPY hello.txt /hello.txt\n' >"$WORK/images/tiny/Dockerfile"
echo hello >"$WORK/images/tiny/hello.txt"
out=$(cd / && SANDMAN_IMAGES_DIR=$WORK/images "$SANDMAN" image build tiny --tag "$TEST_TAG/tiny:1" 2>&1)
check "SANDMAN_IMAGES_DIR names the images folder" bash -c "docker image inspect $TEST_TAG/tiny:1 >/dev/null"
expect_contains "the build context went as a tar stream" "sent a build context of 2 entries" "$out"

# Errors: clear messages, the contract's exit codes, nothing half-built.
rc=0; out=$(cd "$SRC_DIR" && "$SANDMAN" image build no-such-image 2>&1) || rc=$?
expect_eq "unknown image name exits 2" 2 "$rc"
expect_contains "unknown image name says where it looked" "SANDMAN_IMAGES_DIR" "$out"
mkdir -p "$WORK/empty"
rc=0; out=$("$SANDMAN" image build "$WORK/empty" 2>&1) || rc=$?
expect_eq "a folder without a Dockerfile exits 2" 2 "$rc"
expect_contains "a folder without a Dockerfile is named" "has no Dockerfile" "$out"
rc=0; out=$("$SANDMAN" image build "$WORK/images/tiny" --tag 'Not A Tag' 2>&1) || rc=$?
expect_eq "a bad --tag exits 2" 2 "$rc"
mkdir -p "$WORK/badscript"
printf 'FROM scratch\nADD rootfs.tar /\n' >"$WORK/badscript/Dockerfile"
printf '#!/bin/sh\necho half-made >&2\nexit 3\n' >"$WORK/badscript/rootfs.sh"
chmod +x "$WORK/badscript/rootfs.sh"
rc=0; out=$("$SANDMAN" image build "$WORK/badscript" --tag "$TEST_TAG/badscript:1" 2>&1) || rc=$?
expect_eq "a failing rootfs.sh exits 125" 125 "$rc"
expect_contains "a failing rootfs.sh is reported with its status" "exited with status 3" "$out"
check "a failing rootfs.sh builds nothing" bash -c "! docker image inspect $TEST_TAG/badscript:1 >/dev/null 2>&1"
mkdir -p "$WORK/badfile"
printf 'FROM scratch\nCOPY missing.txt /\n' >"$WORK/badfile/Dockerfile"
rc=0; out=$("$SANDMAN" image build "$WORK/badfile" --tag "$TEST_TAG/badfile:1" 2>&1) || rc=$?
expect_eq "a failing build exits 125" 125 "$rc"
expect_contains "a failing build carries the engine's message" "missing.txt" "$out"
mkdir -p "$WORK/clash"
printf 'FROM scratch\nADD rootfs.tar /\n' >"$WORK/clash/Dockerfile"
printf '#!/bin/sh\n: > "$2"\n' >"$WORK/clash/rootfs.sh"
: >"$WORK/clash/rootfs.tar"
rc=0; out=$("$SANDMAN" image build "$WORK/clash" --tag "$TEST_TAG/clash:1" 2>&1) || rc=$?
expect_eq "a staged file shadowing the folder's own exits 2" 2 "$rc"
expect_contains "the shadowed file is named" "rootfs.tar" "$out"
rc=0; out=$("$SANDMAN" --host unix:///nonexistent/docker.sock image build "$WORK/images/tiny" 2>&1) || rc=$?
expect_eq "no engine exits 125" 125 "$rc"
check "no staging directory is left behind" \
  bash -c "! ls -d ${TMPDIR:-/var/tmp}/sandman-image-badscript-* ${TMPDIR:-/var/tmp}/sandman-image-clash-* 2>/dev/null | grep -q ."

# docs/images.md describes every image folder.
for name in "${images[@]}"; do
  expect_contains "docs/images.md describes images/$name" "images/$name" "$(cat "$SRC_DIR/docs/images.md" 2>/dev/null)"
done

it_done
