#!/usr/bin/env bash
# Trainings to reach a target validation accuracy on Fashion-MNIST: the genetic search of
# configs/fashion_hpo.yaml against random search over the same space, with the same budget
# (max_trainings) and the same run seeds, each seed a fresh search of each kind on RANKS member
# groups. Prints a Markdown table per seed and a summary (a search that misses the target counts as
# budget + 1 for the median).
#
#   tests/bench/run_hpo_fashion_bench.sh [BUILD_DIR] [SEEDS (default "1 2 3 4 5 6 7 8 9 10")] [RANKS (default 2)]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-${STRATA_BUILD_DIR:-$root/build}}"
seeds="${2:-1 2 3 4 5 6 7 8 9 10}"
ranks="${3:-2}"
config="$root/configs/fashion_hpo.yaml"
data="$root/data/fashion_mnist.h5"
[ -f "$data" ] || { echo "run_hpo_fashion_bench.sh: $data is missing; run jobs/setup.sh first" >&2; exit 1; }
cmake --build "$build" --target strata -j "$(nproc)" >&2
if [ -f "$root/jobs/env.sh" ]; then
  # shellcheck source=../../jobs/env.sh
  . "$root/jobs/env.sh"
fi
mpiexec="$(command -v mpiexec.mpich || command -v mpiexec)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

budget="$(sed -n 's/^ *max_trainings: *\([0-9]*\).*/\1/p' "$config")"
target="$(sed -n 's/^ *target: *\([0-9.]*\).*/\1/p' "$config")"
grep -q 'algorithm: genetic' "$config" && grep -q '^  seed: 1$' "$config" && [ -n "$budget" ] && [ -n "$target" ] ||
  { echo "run_hpo_fashion_bench.sh: $config no longer has the lines this script edits" >&2; exit 1; }

for seed in $seeds; do
  for kind in genetic random; do
    cfg="$work/$kind-$seed.yaml"
    sed -e "s|^  seed: 1$|  seed: $seed|" -e "s|path: data/|path: $root/data/|" \
        -e "s|dir: runs/fashion_hpo|dir: $work/$kind-$seed|" "$config" > "$cfg"
    [ "$kind" = random ] && sed -i "s/algorithm: genetic/algorithm: random\n      trials: $budget/" "$cfg"
    echo "seed $seed, $kind search ..." >&2
    "$mpiexec" -n "$ranks" "$build/strata" run "$cfg" > "$work/$kind-$seed.log" 2>&1 ||
      { cat "$work/$kind-$seed.log" >&2; exit 1; }
  done
done

/usr/bin/python3 - "$work" "$budget" "$target" "$ranks" "$seeds" <<'PY'
import json, statistics, sys
work, budget, target, ranks, seeds = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5].split()
print(f"Fashion-MNIST, configs/fashion_hpo.yaml: target val_accuracy {target}, budget {budget} trainings, "
      f"{ranks} member groups of one rank.\n")
print("| seed | GA trainings to target | GA wall s | GA best | random trainings to target | random wall s | random best |")
print("| --- | --- | --- | --- | --- | --- | --- |")
runs = {"genetic": [], "random": []}
walls = {"genetic": [], "random": []}
for seed in seeds:
    row = [seed]
    for kind in ("genetic", "random"):
        s = json.load(open(f"{work}/{kind}-{seed}/hpo_summary.json"))
        reached = s["trainings_to_target"]
        runs[kind].append(reached if reached is not None else budget + 1)
        walls[kind].append(s["wall_seconds"])
        row += [str(reached) if reached is not None else f"not in {s['trainings']}",
                f"{s['wall_seconds']:.1f}", f"{s['best']['fitness']:.4f}"]
    print("| " + " | ".join(row) + " |")
print()
print("| search | reached target | median trainings to target | mean wall s |")
print("| --- | --- | --- | --- |")
for kind, name in (("genetic", "GA"), ("random", "random")):
    hits = sum(r <= budget for r in runs[kind])
    median = statistics.median(runs[kind])
    shown = f"{median:g}" if median <= budget else f"> {budget}"
    print(f"| {name} | {hits} of {len(seeds)} | {shown} | {statistics.mean(walls[kind]):.1f} |")
PY
