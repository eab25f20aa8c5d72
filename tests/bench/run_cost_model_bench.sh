#!/usr/bin/env bash
# The cost model against measured step times on this machine: strata calibrate under mpiexec -n 2
# and -n 4 (each times MPI between its ranks and a one-thread step on all of them at once), then,
# for layouts of 1, 2 and 4 local ranks, with the calibration of as many ranks (1: the 2-rank one),
# the step time `strata plan --predict --network local` gives and the one `strata run` measures
# (training samples/s of the epochs after the first, global batch / samples/s; the median over
# epochs and members). Prints a Markdown table with each ratio; goal: within 15%.
#
#   tests/bench/run_cost_model_bench.sh [BUILD_DIR] [CONFIG]
# BUILD_DIR is a build tree (strata is built first) or a directory that holds a strata binary.
# CONFIG (default configs/parallel.yaml) must allow D = 2 and M = 2 (it has split layers).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-${STRATA_BUILD_DIR:-$root/build}}"
config="$(realpath "${2:-$root/configs/parallel.yaml}")"
if [ -f "$build/CMakeCache.txt" ]; then cmake --build "$build" --target strata -j "$(nproc)" >&2; fi
if [ -f "$root/jobs/env.sh" ]; then
  # shellcheck source=../../jobs/env.sh
  . "$root/jobs/env.sh"
fi
strata="$build/strata"
mpiexec="$(command -v mpiexec.mpich || command -v mpiexec)"
# Only the standard library is needed: any Python 3 will do (a GPU machine may lack Debian's).
python="$(command -v /usr/bin/python3 || command -v python3)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# Every rank takes its share of the cores (run.threads 0), as a user's run does; training data
# enough for 100 steps of the largest global batch per epoch. The model is of CPU steps: a
# machine with a GPU would otherwise train on it (run.device auto).
common=(--set run.device=cpu --set run.threads=0 --set data.train_subset=7200 --set data.test_subset=500
        --set data.validation_fraction=0.1)
for n in 2 4; do
  "$mpiexec" -n "$n" "$strata" calibrate "$config" "${common[@]}" --repeats 5 \
    --out "$work/calibration_$n.json" >&2
done

# name | ranks | overrides
cases=(
  "1 rank|1|parallel.data=1"
  "2 ranks, G 2|2|parallel.data=1"
  "2 ranks, D 2|2|parallel.data=2 parallel.layout=data"
  "2 ranks, M 2|2|parallel.data=1 parallel.model=2 parallel.layout=data"
  "4 ranks, G 4|4|parallel.data=1"
  "4 ranks, G 2 x D 2|4|parallel.data=2"
  "4 ranks, D 2 x M 2|4|parallel.data=2 parallel.model=2"
)
rows=()
for entry in "${cases[@]}"; do
  IFS='|' read -r name ranks overrides <<<"$entry"
  sets=("${common[@]}")
  for o in $overrides; do sets+=(--set "$o"); done
  predicted="$("$strata" plan "$config" --ranks "$ranks" --ranks-per-node "$ranks" --predict \
    --network local --calibration "$work/calibration_$((ranks < 2 ? 2 : ranks)).json" "${sets[@]}" |
    awk -F'|' -v r="$ranks" '$2 + 0 == r && $3 + 0 >= 1 {gsub(/ /, "", $7); print $7}')"
  out="$work/run_${ranks}_${#rows[@]}"
  "$mpiexec" -n "$ranks" "$strata" run "$config" --fresh "${sets[@]}" --set training.epochs=4 \
    --set "output.dir=$out" > "$out.log" 2>&1 || { tail "$out.log" >&2; exit 1; }
  measured="$("$python" - "$out" <<'PY'
import glob, json, statistics, sys
out = sys.argv[1]
files = glob.glob(f"{out}/members/*/metrics.jsonl") or [f"{out}/metrics.jsonl"]
plan = open(f"{out}/plan.txt").read()
rates = []
for f in files:
    rows = [json.loads(line) for line in open(f)]
    rates += [r["samples_per_s"] for r in rows[1:]]
print(statistics.median(rates))
PY
)"
  batch="$(grep -o 'global batch [0-9]*' "$out/plan.txt" | head -1 | awk '{print $3}')"
  rows+=("$name|$predicted|$batch|$measured")
  echo "[bench] $name: predicted $predicted ms, measured at $measured samples/s (batch $batch)" >&2
done

"$python" - "$config" "$work/calibration_2.json" "$work/calibration_4.json" "${rows[@]}" <<'PY'
import json, sys
config, calibration, four = sys.argv[1], json.load(open(sys.argv[2])), json.load(open(sys.argv[3]))
print(f"strata plan --predict --network local against strata run, {config.split('/')[-1]}, local "
      f"batch {calibration['local_batch']}, on {calibration['cpu']} ({calibration['cores']} cores); "
      f"one-thread step alone {calibration['steps'][0]['step_s'] * 1e3:.2f} ms; calibrated on "
      + "; ".join(f"{c['intra_node']['ranks']} ranks: MPI {c['intra_node']['latency_s'] * 1e6:.2f} us, "
                  f"{c['intra_node']['bytes_per_s'] / 1e9:.1f} GB/s, with all stepping "
                  + ", ".join(f"{s['step_s'] * 1e3:.2f} ms on {s['threads']} thread(s)"
                              for s in c['intra_node']['shared_steps'])
                  + (f", as replica pairs {c['intra_node']['replica_pairs_step']['step_s'] * 1e3:.2f} ms"
                     if 'replica_pairs_step' in c['intra_node'] else "")
                  + (f", split in pairs {c['split_over_2']['all_pairs_step_s'] * 1e3:.2f} ms"
                     if 'all_pairs_step_s' in c.get('split_over_2', {}) else "")
                  for c in (calibration, four))
      + ".\n")
print("| ranks | predicted step ms | measured step ms | predicted / measured | within 15% |")
print("| --- | --- | --- | --- | --- |")
worst = 0.0
for row in sys.argv[4:]:
    name, predicted, batch, rate = row.split("|")
    measured = 1e3 * int(batch) / float(rate)
    ratio = float(predicted) / measured
    worst = max(worst, abs(ratio - 1))
    print(f"| {name} | {float(predicted):.2f} | {measured:.2f} | {ratio:.2f} | "
          f"{'yes' if abs(ratio - 1) <= 0.15 else 'no'} |")
print(f"\nLargest error: {100 * worst:.0f}% (goal: within 15%).")
PY
