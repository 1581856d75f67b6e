#!/usr/bin/env bash
# Before/after benchmark of two source trees (e.g. main before a change and
# after it): scripts/bench.sh of each tree, in alternating rounds so that the
# drift of a shared machine hits both alike, then one table of the sandman
# figures (p50 per round, median of rounds, after/before).
#
#   scripts/bench-compare.sh BEFORE_TREE AFTER_TREE [ROUNDS] [--full]
#     ROUNDS   rounds of each (default 2); --full: full runs instead of --quick
# Results: bench/results/compare/{before,after}-N/latest.json and compare.md
# (SANDMAN_BENCH_COMPARE_OUT elsewhere). SANDMAN_BENCH_SKIP_WS=1 is passed on
# to bench.sh (a tree whose bench.sh does not know it runs S3/S4 anyway;
# only the figures both sides have are compared).
set -euo pipefail

SM_SCRIPT=bench-compare
. "$(dirname "${BASH_SOURCE[0]}")/lib/common.sh"

[ $# -ge 2 ] || { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
BEFORE=$(cd "$1" && pwd)
AFTER=$(cd "$2" && pwd)
ROUNDS=${3:-2}
MODE=(--quick)
[ "${4:-}" = --full ] && MODE=()
OUT=${SANDMAN_BENCH_COMPARE_OUT:-$SM_ROOT/bench/results/compare}
mkdir -p "$OUT"

for i in $(seq 1 "$ROUNDS"); do
  for side in before after; do
    tree=$BEFORE
    [ "$side" = after ] && tree=$AFTER
    say round "$i $side ($tree), load $(cut -d' ' -f1-3 /proc/loadavg)"
    SANDMAN_BENCH_BUILD=$tree/build-bench SANDMAN_BENCH_OUT=$OUT/$side-$i \
      "$tree/scripts/bench.sh" "${MODE[@]}" >"$OUT/$side-$i.log" 2>&1 ||
      die "bench of $tree failed: see $OUT/$side-$i.log"
  done
done

"$SM_PY" - "$OUT" "$ROUNDS" <<'PY' | tee "$OUT/compare.md"
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
figs = {}
for side in ("before", "after"):
    for i in range(1, rounds + 1):
        d = json.load(open(f"{out}/{side}-{i}/latest.json"))
        for s, rows in d["scenarios"].items():
            for r in rows:
                if r.get("kind") != "sandman" or r.get("p50") is None:
                    continue
                key = (s, r["name"], r.get("unit", ""))
                figs.setdefault(key, {"before": [], "after": []})[side].append(r["p50"])
print("| scenario | figure | unit | before (p50 per round) | after (p50 per round) | after/before |")
print("|---|---|---|---|---|---|")
for (s, name, unit), v in sorted(figs.items()):
    if not v["before"] or not v["after"]:
        continue
    b, a = statistics.median(v["before"]), statistics.median(v["after"])
    fmt = lambda xs: ", ".join(f"{x:.3g}" for x in xs)
    print(f"| {s} | {name} | {unit} | {fmt(v['before'])} | {fmt(v['after'])} | {a / b:.2f} |")
PY
