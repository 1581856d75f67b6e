#!/usr/bin/env bash
# The egress proxy's added latency per connection (bench/egress/egress_bench.c):
# median and p99 of a small HTTPS request through sandman's egress proxy vs on
# an open bridge network, to the same server on this machine. Writes
# bench/results/egress.json and egress.md.
#
#   bench/egress/run.sh [ROUNDS [PER_ROUND]]    (default 10 x 50)
#
# Environment: SANDMAN_BENCH_BUILD (default build-bench, Release),
# SANDMAN_BENCH_OUT (default bench/results).
set -euo pipefail

SM_SCRIPT=bench-egress
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/common.sh"
cd "$SM_ROOT"

BUILD=${SANDMAN_BENCH_BUILD:-$SM_ROOT/build-bench}
OUT=${SANDMAN_BENCH_OUT:-$SM_ROOT/bench/results}
engine_ping || die "no engine answers at $(engine_host) (scripts/setup.sh starts one)"

say build "$BUILD (Release)"
cmake -S "$SM_ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
make -C "$BUILD" -j2 sandman_static sandman_cli >/dev/null
mkdir -p "$BUILD/bench" "$OUT"
# shellcheck disable=SC2046
cc -O2 -g -Wall -Wextra -pthread -I"$SM_ROOT/include" -I"$SM_ROOT/tests" -o "$BUILD/bench/egress_bench" \
  bench/egress/egress_bench.c "$BUILD/libsandman.a" \
  $(pkg-config --libs libcurl json-c yaml-0.1 libarchive openssl libmicrohttpd) -lm

say run "egress_bench ${*:-10 50} (a few minutes)"
LOAD_BEFORE=$(cut -d' ' -f1-3 /proc/loadavg)
SANDMAN_BIN=$BUILD/sandman SANDMAN_SOURCE_DIR=$SM_ROOT "$BUILD/bench/egress_bench" "$@" >"$OUT/egress.json.part"
LOAD_AFTER=$(cut -d' ' -f1-3 /proc/loadavg)
mv -f "$OUT/egress.json.part" "$OUT/egress.json"
"$SM_PY" - "$OUT/egress.json" "$OUT/egress.md" "$LOAD_BEFORE" "$LOAD_AFTER" <<'PY'
import json, os, platform, subprocess, sys, time
r = json.load(open(sys.argv[1]))
r["load_average"] = {"before": sys.argv[3], "after": sys.argv[4]}
json.dump(r, open(sys.argv[1], "w"), indent=2)
a, b = r["results"]["open_bridge"], r["results"]["through_proxy"]
cpu = os.cpu_count()
lines = [
    "# Egress proxy latency (bench/egress/run.sh)",
    "",
    "%s, %s, %d CPUs, load average %s before and %s after; %s." % (
        time.strftime("%Y-%m-%d"), platform.platform(), cpu, sys.argv[3], sys.argv[4], r["what"]),
    "",
    "| path | n | median (ms) | p99 (ms) | mean (ms) | min (ms) |",
    "|---|---|---|---|---|---|",
    "| open bridge network, direct | %d | %.2f | %.2f | %.2f | %.2f |" % (a["n"], a["median_ms"], a["p99_ms"], a["mean_ms"], a["min_ms"]),
    "| allowlist, through the egress proxy | %d | %.2f | %.2f | %.2f | %.2f |" % (b["n"], b["median_ms"], b["p99_ms"], b["mean_ms"], b["min_ms"]),
    "",
    "Added by the proxy per connection: **%.2f ms** at the median, **%.2f ms** at p99." % (r["added_ms"]["median"], r["added_ms"]["p99"]),
    "",
    "Through the proxy a connection costs two name lookups on the engine's embedded DNS (the client's",
    "for `sandman-egress`, the proxy's for the destination) where the direct one costs one, a second",
    "TCP connection, the CONNECT exchange and a thread in the proxy. On a loaded machine the",
    "embedded DNS (served by dockerd) dominates; the minimum shows the cost on an idle moment.",
    "",
]
open(sys.argv[2], "w").write("\n".join(lines))
print("\n".join(lines))
PY
