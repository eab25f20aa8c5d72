#!/usr/bin/env bash
# The genetic search on the function suite against DEAP's eaSimple and random search: sphere,
# rastrigin, rosenbrock and ackley in 2, 10 and 30 dimensions, two budgets of evaluations each,
# population 50, the median best value over seeds (lower is better). Each search gets the same
# number of evaluations: strata counts trainings (repeated genomes are cached, not evaluated).
#   tests/bench/run_ga_suite_bench.sh [BUILD_DIR] [SEEDS] [BUDGETS] [DIMS] [GA_SETTINGS]
# GA_SETTINGS: extra hpo settings for strata's GA, e.g. "crossover_rate: 0.7, mutation_probability: 0.3"
# (default: none, the defaults).
# Needs python3-deap (jobs/install_deps.sh --with-deap).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-${STRATA_BUILD_DIR:-$root/build}}"
seeds="${2:-1,2,3,4,5,6,7,8,9,10,11}"
budgets="${3:-550,2050}"
dims="${4:-2,10,30}"
settings="${5:-}"
cmake --build "$build" --target strata -j "$(nproc)" >&2
"$root/jobs/install_deps.sh" --with-deap >&2
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

for fn in sphere rastrigin rosenbrock ackley; do
  for d in ${dims//,/ }; do
    for b in ${budgets//,/ }; do
      for s in ${seeds//,/ }; do
        for kind in genetic random; do
          dir="$work/$kind-$fn-$d-$b-$s"
          if [ "$kind" = genetic ]; then
            hpo="{algorithm: genetic, population: 50, generations: 1000000, max_trainings: $b${settings:+, $settings}}"
          else
            hpo="{algorithm: random, trials: $b}"
          fi
          printf 'run: {name: suite, seed: %s}\nmodel: {objective: %s, dims: %s}\nstages: [{hpo: %s}]\noutput: {dir: %s}\n' \
            "$s" "$fn" "$d" "$hpo" "$dir" > "$dir.yaml"
          "$build/strata" run "$dir.yaml" > "$dir.log" 2>&1 || { echo "strata failed: $dir.log" >&2; tail -3 "$dir.log" >&2; exit 1; }
        done
      done
    done
  done
done
/usr/bin/python3 "$root/tests/bench/ga_suite_deap.py" "$budgets" "$dims" "$seeds" > "$work/deap.jsonl"

GA_SETTINGS="$settings" /usr/bin/python3 - "$work" "$budgets" "$dims" "$seeds" <<'PY'
import json, statistics, sys
work, budgets, dims, seeds = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(","), sys.argv[4].split(",")
deap = {}
for line in open(f"{work}/deap.jsonl"):
    r = json.loads(line)
    deap.setdefault((r["function"], str(r["dims"]), str(r["budget"])), []).append(r["best"])
def strata(kind, fn, d, b):
    out = []
    for s in seeds:
        summary = json.load(open(f"{work}/{kind}-{fn}-{d}-{b}-{s}/hpo_summary.json"))
        out.append(summary["best"]["fitness"])
    return out
import os
print(f"Function suite, population 50, median best value over {len(seeds)} seeds (lower is better); "
      f"strata GA settings: {os.environ.get('GA_SETTINGS') or 'the defaults'}; "
      "DEAP 1.3 eaSimple: cxBlend 0.5, mutGaussian sigma 10% of the range, indpb 0.2, tournament 3, "
      "cxpb 0.7, mutpb 0.3.\n")
print("| function | dims | evaluations | strata GA | DEAP eaSimple | random | GA / DEAP | GA beats DEAP |")
print("| --- | --- | --- | --- | --- | --- | --- | --- |")
rows = wins = 0
for fn in ("sphere", "rastrigin", "rosenbrock", "ackley"):
    for d in dims:
        for b in budgets:
            ga = statistics.median(strata("genetic", fn, d, b))
            rnd = statistics.median(strata("random", fn, d, b))
            dp = statistics.median(deap[fn, d, b])
            rows += 1
            wins += ga < dp
            ratio = ga / dp if dp > 0 else float("inf")
            print(f"| {fn} | {d} | {b} | {ga:.4g} | {dp:.4g} | {rnd:.4g} | {ratio:.2f} | {'yes' if ga < dp else 'no'} |")
print(f"\nThe GA beats DEAP's median on {wins} of {rows} rows.")
PY
