#!/usr/bin/env bash
# sandman's side-by-side benchmark: every scenario (S1..S7, see
# docs/performance.md) against the docker CLI, the Python SDK and the
# engine's floor, in one run. Writes bench/results/latest.md, latest.json and
# latest.png.
#
#   scripts/bench.sh            the full run (30+ calls per peer, ~15 minutes)
#   scripts/bench.sh --quick    a smoke run (a few calls each, ~3 minutes)
#   scripts/bench.sh --guard    the short guard (~1 minute): S1 and S2 through the
#                               runner as ratios to docker run --rm of the same run,
#                               into guard.md/guard.json; uses the build as it is
#                               (default build/), builds only the two clients it needs
#
# Environment (optional):
#   SANDMAN_BENCH_BUILD   build directory (default build-bench, Release)
#   SANDMAN_BENCH_OUT     results directory (default bench/results)
#   SANDMAN_BENCH_WORKSPACE  an S3 workspace to use instead of the generated one
#   SANDMAN_BENCH_SKIP_WS=1  leave out S3/S4 (the workspace copies)
# Needs a local engine (unix socket) with sandman/minimal:latest (scripts/setup.sh).
set -euo pipefail

SM_SCRIPT=bench
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"
cd "$SM_ROOT"

QUICK=()
GUARD=0
for a in "$@"; do
  case "$a" in
    --quick) QUICK=(--quick) ;;
    --guard) GUARD=1 ;;
    -h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option '$a' (try --help)" ;;
  esac
done

BUILD=${SANDMAN_BENCH_BUILD:-$SM_ROOT/build-bench}
[ "$GUARD" = 1 ] && BUILD=${SANDMAN_BENCH_BUILD:-$SM_ROOT/build}
OUT=${SANDMAN_BENCH_OUT:-$SM_ROOT/bench/results}
INSTANCE=bench-$$

# --- what the run needs ------------------------------------------------------
need_pkgs=()
[ -x /usr/bin/python3 ] || need_pkgs+=(python3)
if [ "$GUARD" = 0 ]; then
  command -v gnuplot >/dev/null || need_pkgs+=(gnuplot-nox)
  /usr/bin/python3 -c 'import docker' 2>/dev/null || need_pkgs+=(python3-docker)
  command -v strace >/dev/null || need_pkgs+=(strace)
fi
command -v docker >/dev/null || need_pkgs+=(docker.io)
command -v cmake >/dev/null || need_pkgs+=(cmake)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  sm_is_root || die "missing Debian packages: ${need_pkgs[*]} (apt-get install -y ${need_pkgs[*]})"
  say packages "installing ${need_pkgs[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq || die "apt-get update failed"
  apt-get install -y -qq --no-install-recommends "${need_pkgs[@]}" >/dev/null ||
    die "apt-get install ${need_pkgs[*]} failed"
fi
engine_is_local || die "the floor client speaks to a unix socket: DOCKER_HOST must be unix://"
engine_ping || die "no engine answers at $(engine_host) (scripts/setup.sh starts one)"
docker image inspect sandman/minimal:latest >/dev/null 2>&1 ||
  die "image sandman/minimal:latest is missing (scripts/setup.sh builds it)"

# --- build --------------------------------------------------------------------
CFLAGS=(-O2 -g -Wall -Wextra -pthread)
if [ "$GUARD" = 1 ]; then
  # The build as it is (CI's, already made): only what the guard runs.
  [ -x "$BUILD/sandman" ] || die "$BUILD/sandman is missing (scripts/setup.sh builds it)"
  mkdir -p "$BUILD/bench"
  cc "${CFLAGS[@]}" -o "$BUILD/bench/floor" bench/floor/floor.c bench/common/rawhttp.c
  cc "${CFLAGS[@]}" -o "$BUILD/bench/smhttp" bench/http/smhttp.c bench/common/rawhttp.c
else
  say build "$BUILD (Release)"
  cmake -S "$SM_ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
  make -C "$BUILD" -j2 sandman sandman_static sandman_cli >/dev/null
  mkdir -p "$BUILD/bench"
  cc "${CFLAGS[@]}" -o "$BUILD/bench/floor" bench/floor/floor.c bench/common/rawhttp.c
  cc "${CFLAGS[@]}" -o "$BUILD/bench/smhttp" bench/http/smhttp.c bench/common/rawhttp.c
  # shellcheck disable=SC2046
  cc "${CFLAGS[@]}" -I"$SM_ROOT/include" $(pkg-config --cflags json-c) -o "$BUILD/bench/smbench" \
    bench/sm/smbench.c -L"$BUILD" -lsandman -Wl,-rpath,"$BUILD" $(pkg-config --libs json-c)
  # The workspace engineer's copy benchmark (bench/workspace): S3/S4's copy alone.
  # shellcheck disable=SC2046
  cc "${CFLAGS[@]}" -I"$SM_ROOT/include" -I"$SM_ROOT/src/lib" -I"$SM_ROOT/src/shared" -o "$BUILD/bench/ws_bench" \
    bench/workspace/ws_bench.c "$BUILD/libsandman.a" \
    $(pkg-config --libs libcurl json-c yaml-0.1 libarchive openssl libmicrohttpd) -lm
fi

# --- run ----------------------------------------------------------------------
# bench.py cleans up after itself; this trap is the net under it (an
# interrupted run): everything labelled with this run's instance goes.
cleanup() {
  local ids vols
  ids=$(docker ps -aq --filter "label=io.sandman.instance=$INSTANCE" 2>/dev/null || true)
  ids="$ids $(docker ps -aq --filter "label=io.sandman.bench=$INSTANCE" 2>/dev/null || true)"
  # shellcheck disable=SC2086
  [ -n "${ids// /}" ] && docker rm -f -v $ids >/dev/null 2>&1 || true
  vols=$(docker volume ls -q --filter "label=io.sandman.instance=$INSTANCE" 2>/dev/null || true)
  # shellcheck disable=SC2086
  [ -n "$vols" ] && docker volume rm -f $vols >/dev/null 2>&1 || true
  vols=$(docker volume ls -q --filter "label=io.sandman.bench=$INSTANCE" 2>/dev/null || true)
  # shellcheck disable=SC2086
  [ -n "$vols" ] && docker volume rm -f $vols >/dev/null 2>&1 || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

WS=()
[ -n "${SANDMAN_BENCH_WORKSPACE:-}" ] && WS=(--workspace "$SANDMAN_BENCH_WORKSPACE")
[ -n "${SANDMAN_BENCH_SKIP_WS:-}" ] && WS+=(--skip-ws)
if [ "$GUARD" = 1 ]; then
  say run "instance $INSTANCE (guard), load $(cut -d' ' -f1-3 /proc/loadavg)"
  /usr/bin/python3 bench/bench.py --build "$BUILD" --out "$OUT" --instance "$INSTANCE" --guard
  say done "$OUT/guard.md"
  exit 0
fi
say run "instance $INSTANCE${QUICK:+ (quick)}"
/usr/bin/python3 bench/bench.py --build "$BUILD" --out "$OUT" --instance "$INSTANCE" \
  "${QUICK[@]}" "${WS[@]}"
say done "$OUT/latest.md"
