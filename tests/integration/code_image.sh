# Sourced by test_code*.sh: sandman/general (its kernel, numpy, pandas,
# matplotlib) for code contexts, the tests' own build of it
# (scripts/test-images.sh through it_test_image: sandman-test/general:<inputs
# hash>, built on first use, shared by the tests), unless SANDMAN_CODE_IMAGE
# names one already. Never the user's own build of sandman/general.
code_image() {
  if [ -n "${SANDMAN_CODE_IMAGE:-}" ]; then
    export SANDMAN_CODE_IMAGE
    return 0
  fi
  local tag log
  log=$(mktemp)
  if ! tag=$(it_test_image general 2>"$log"); then
    it_fail "the test image general: scripts/test-images.sh failed: $(tail -n 5 "$log")"
    rm -f "$log"
    it_done
    exit 1
  fi
  rm -f "$log"
  export SANDMAN_CODE_IMAGE=$tag
}

code_image_cleanup() {
  cleanup_instance
  return 0
}
