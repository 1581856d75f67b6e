#!/usr/bin/env bash
# sandman's whole test run: set-up (scripts/setup.sh), the images the tests
# use (scripts/test-images.sh), then in build/ the unit tests and the
# integration tests against the real engine, then the same again in an
# ASan/UBSan build (build-asan/). Exits non-zero if anything failed, and, in
# CI (CI=true), if any test was skipped instead of run.
#
#   scripts/test.sh [--quick] [--fresh-engine] [--prefix P] [-R REGEX]
#     --quick         leave out the ASan/UBSan pass
#     --fresh-engine  run everything against a brand-new engine started for
#                     this run (its own data root, socket and network
#                     namespace; root only), removed at the end: what CI does
#     --prefix P      the tests' instance names start with P, not "it" (two
#                     runs at once from one checkout)
#     -R REGEX        only the tests whose name matches (ctest -R), e.g. -R engine
# After the plain integration tests, the speed guard (scripts/bench.sh
# --guard, about a minute) writes its ratios to the log: figures, never a
# verdict. Left out with -R, or with SANDMAN_BENCH_GUARD=0.
set -euo pipefail

SM_SCRIPT="test"
# shellcheck source=lib/common.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
cd "$SM_ROOT"

usage() {
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'
  exit "${1:-0}"
}

QUICK=0
FRESH=0
REGEX=()
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --fresh-engine) FRESH=1 ;;
    --prefix) [ $# -ge 2 ] || usage 2; export SANDMAN_TEST_PREFIX=$2; shift ;;
    -R) [ $# -ge 2 ] || usage 2; REGEX=(-R "$2"); shift ;;
    -R*) REGEX=(-R "${1#-R}") ;;
    -h | --help) usage 0 ;;
    *) echo "test: unknown option '$1'" >&2; usage 2 ;;
  esac
  shift
done

IN_CI=0
case "${CI:-}" in true | 1) IN_CI=1 ;; esac
# The tests read CI themselves (fail rather than skip without an engine):
# ctest passes the environment through, so keep it exported.
[ -n "${CI:-}" ] && export CI

START=$(date +%s)
JOBS=2
LOGS=$SM_ROOT/build/test-logs
SUMMARY=()
FAILED=0

# run_ctest BUILD_DIR LABEL: one ctest pass, its summary kept for the end.
run_ctest() {
  local dir=$1 label=$2 log rc=0 line total skipped executed names
  # Between passes a test may have started a second dockerd that removed docker0.
  [ "$label" = integration ] || [ "$label" = swarm ] && engine_heal_bridge
  log=$LOGS/$(basename "$dir")-$label.log
  echo
  echo "== $(basename "$dir"): $label tests (ctest -L $label${REGEX:+ ${REGEX[*]}}, -j$JOBS)"
  ctest --test-dir "$dir" -L "^$label\$" "${REGEX[@]}" --output-on-failure -j"$JOBS" 2>&1 |
    tee "$log" || rc=$?
  line=$(grep -E 'tests passed, [0-9]+ tests? failed out of [0-9]+' "$log" | tail -n 1 || true)
  total=$(sed -n 's/.*out of \([0-9][0-9]*\).*/\1/p' <<<"$line")
  if [ -z "$line" ] && grep -q 'No tests were found' "$log"; then line="no tests found"; total=0; fi
  # Tests that did not run: "  7 - integration/test_x.sh (Skipped)", "(Not Run)", "(Disabled)".
  names=$(grep -E '^[[:space:]]*[0-9]+ - .* \((Skipped|Not Run|Disabled)\)[[:space:]]*$' "$log" |
    sed -E 's/^[[:space:]]*[0-9]+ - //' || true)
  skipped=$(grep -c . <<<"$names" || true)
  executed=$((${total:-0} - skipped))
  local verdict=ok
  if [ "$rc" -ne 0 ] || [ -z "$line" ]; then verdict=FAILED; fi
  if [ "$skipped" -gt 0 ] && [ "$IN_CI" = 1 ]; then
    verdict=FAILED
    echo "test: CI=true but $skipped test(s) did not run:" >&2
    sed 's/^/    /' <<<"$names" >&2
  fi
  if [ "$label" != unit ] && [ "${total:-0}" -eq 0 ] && [ ${#REGEX[@]} -eq 0 ] && [ "$IN_CI" = 1 ]; then
    verdict=FAILED
    echo "test: CI=true but no integration tests were found" >&2
  fi
  [ "$verdict" = ok ] || FAILED=1
  local extra=""
  [ "$label" != unit ] && extra=" - $executed $label tests executed against $(engine_host)${FRESH_DIR:+ (a brand-new engine)}"
  [ "$skipped" -gt 0 ] && extra="$extra, $skipped skipped: $(tr '\n' ' ' <<<"$names")"
  SUMMARY+=("$(printf '%-6s %-10s %-11s %s%s' "$verdict" "$(basename "$dir")" "$label" "${line:-ctest gave no summary (exit $rc)}" "$extra")")
}

# build_asan: configure once, then build; the build errors shown on failure.
build_asan() {
  local dir=$SM_ROOT/build-asan log=$LOGS/build-asan-build.log
  echo
  echo "== build-asan: ASan/UBSan build"
  if [ ! -f "$dir/CMakeCache.txt" ]; then
    cmake -S "$SM_ROOT" -B "$dir" -DSANDMAN_SANITIZE='address;undefined' \
      -DCMAKE_BUILD_TYPE=Debug -DSANDMAN_WERROR="$([ "$IN_CI" = 1 ] && echo ON || echo OFF)" \
      >"$log" 2>&1 || { tail -n 30 "$log" >&2; return 1; }
  fi
  if ! cmake --build "$dir" -j"$(nproc)" >"$log" 2>&1; then
    echo "test: error: the ASan build failed (full log: $log):" >&2
    { grep -E ': (fatal )?error:|undefined reference|Error [0-9]+|No rule to make|CMake Error' "$log" | head -n 30 ||
      tail -n 30 "$log"; } | sed 's/^/    /' >&2
    return 1
  fi
  echo "build-asan: built ($(grep -c 'Building C object' "$log" || true) sources compiled)"
}

if [ "$FRESH" = 1 ]; then
  # shellcheck source=lib/fresh_engine.sh
  . "$SM_ROOT/scripts/lib/fresh_engine.sh"
  echo "== a brand-new engine (--fresh-engine)"
  trap fresh_engine_stop EXIT
  trap 'exit 130' INT TERM
  fresh_engine_prepare
fi

echo "== set-up (scripts/setup.sh)"
"$SM_ROOT/scripts/setup.sh" || die "set-up failed; nothing was tested"
mkdir -p "$LOGS"
[ "$FRESH" = 1 ] && fresh_engine_open_to_host

# Built here once, so that no test pays for it and the time shows; a test
# run on its own builds what it needs itself (scripts/test-images.sh).
echo
echo "== test images (scripts/test-images.sh ensure general dind)"
IMAGES_START=$(date +%s)
"$SM_ROOT/scripts/test-images.sh" ensure general dind || die "the test images could not be built; nothing was tested"
echo "test-images: ready in $(sm_elapsed "$IMAGES_START")"

run_ctest "$SM_ROOT/build" unit
run_ctest "$SM_ROOT/build" integration
# The swarm backend on a three-node swarm in containers: once, plain build only.
run_ctest "$SM_ROOT/build" swarm

# ---- the speed guard: figures for the log, not a test (docs/performance.md) ----
if [ ${#REGEX[@]} -eq 0 ] && [ "${SANDMAN_BENCH_GUARD:-1}" != 0 ]; then
  echo
  echo "== speed guard (scripts/bench.sh --guard; ratios to docker run --rm, not pass/fail)"
  if SANDMAN_BENCH_BUILD=$SM_ROOT/build SANDMAN_BENCH_OUT=$LOGS/bench-guard \
    "$SM_ROOT/scripts/bench.sh" --guard >"$LOGS/bench-guard.log" 2>&1; then
    cat "$LOGS/bench-guard/guard.md"
    SUMMARY+=("$(printf '%-6s %-10s %-11s %s' info build speed-guard "$LOGS/bench-guard/guard.md")")
  else
    tail -n 20 "$LOGS/bench-guard.log"
    SUMMARY+=("$(printf '%-6s %-10s %-11s %s' info build speed-guard "did not run: $LOGS/bench-guard.log")")
  fi
fi

if [ "$QUICK" = 0 ]; then
  # Any sanitizer report fails the test that triggered it, with a stack.
  export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:abort_on_error=0:detect_leaks=1:print_stacktrace=1:check_initialization_order=1:strict_init_order=1}
  export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
  if build_asan; then
    run_ctest "$SM_ROOT/build-asan" unit
    run_ctest "$SM_ROOT/build-asan" integration
  else
    FAILED=1
    SUMMARY+=("$(printf '%-6s %-10s %-11s %s' FAILED build-asan build "see $LOGS/build-asan-build.log")")
  fi
fi

# Test images of other inputs that no run wanted for a week (the engine's
# disk); a fresh engine goes away whole.
[ "$FRESH" = 1 ] || "$SM_ROOT/scripts/test-images.sh" prune 7 || true

echo
echo "== summary ($(sm_elapsed "$START"); logs in $LOGS)"
printf '%s\n' "${SUMMARY[@]}"
[ "$QUICK" = 1 ] && echo "(--quick: no ASan/UBSan pass)"
if [ "$FAILED" -ne 0 ]; then
  echo "test: FAILED" >&2
  exit 1
fi
echo "test: all passed"
