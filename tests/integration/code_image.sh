# Sourced by test_code*.sh: sandman/general (its kernel, numpy, pandas,
# matplotlib) for code contexts, built under this test's own tag with the
# shared root file system cache, unless SANDMAN_CODE_IMAGE names one
# already; removed on exit when this test built it.
code_image() {
  if [ -n "${SANDMAN_CODE_IMAGE:-}" ]; then
    export SANDMAN_CODE_IMAGE
    return 0
  fi
  export SANDMAN_IMAGE_CACHE=${SANDMAN_IMAGE_CACHE:-$SRC_DIR/build/image-cache}
  local tag log
  tag=sandman-it/$(printf '%s' "$SANDMAN_INSTANCE" | tr -c 'a-z0-9._-' '-')/general:1
  log=$(mktemp)
  if ! (cd "$SRC_DIR" && "$SANDMAN" image build general --tag "$tag") >"$log" 2>&1; then
    it_fail "image build general: $(tail -n 5 "$log")"
    rm -f "$log"
    it_done
    exit 1
  fi
  rm -f "$log"
  CODE_IMAGE_BUILT=$tag
  export SANDMAN_CODE_IMAGE=$tag
}

code_image_cleanup() {
  cleanup_instance
  [ -n "${CODE_IMAGE_BUILT:-}" ] && docker image rm -f "$CODE_IMAGE_BUILT" >/dev/null 2>&1
  return 0
}
