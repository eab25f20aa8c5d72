#!/usr/bin/env bash
# The cost model against measured step times on this machine: for layouts of 1, 2 and 4 local
# ranks, the step time `strata plan --predict --network local` gives and the one `strata run`
# measures (training samples/s of the epochs after the first, global batch / samples/s; the median
# over epochs and members). The prediction uses strata calibrate under mpiexec -n 2 or -n 4 (as
# many ranks as the layout; 1: the 2-rank one), which times MPI between its ranks and a one-thread
# step on all of them at once; it runs before and after the layouts it serves, and the prediction
# is the mean of the two. Prints a Markdown table with each ratio; goal: within 15%.
#
#   tests/bench/run_cost_model_bench.sh [BUILD_DIR] [CONFIG]
# BUILD_DIR is a build tree (strata is built first) or a directory that holds a strata binary.
# CONFIG (default configs/parallel.yaml) must allow D = 2 and M = 2 (it has split layers).
set -euo pipefail
# measure runs inside $(...): without this, a failed step there would not stop the script.
shopt -s inherit_errexit
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
calibrate() {  # ranks, output file
  "$mpiexec" -n "$1" "$strata" calibrate "$config" "${common[@]}" --repeats 5 --out "$2" >&2
}
# The step `strata plan --predict` gives for one case with one calibration.
predict() {  # ranks, calibration file, --set options...
  local ranks="$1" calibration="$2"
  shift 2
  "$strata" plan "$config" --ranks "$ranks" --ranks-per-node "$ranks" --predict --network local \
    --calibration "$calibration" "$@" |
    awk -F'|' -v r="$ranks" '$2 + 0 == r && $3 + 0 >= 1 {gsub(/ /, "", $7); print $7}'
}

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
# A case's steps measured by strata run: "batch|samples/s".
measure() {  # ranks, output dir, --set options...
  local ranks="$1" out="$2"
  shift 2
  "$mpiexec" -n "$ranks" "$strata" run "$config" --fresh "$@" --set training.epochs=4 \
    --set "output.dir=$out" > "$out.log" 2>&1 || { tail "$out.log" >&2; exit 1; }
  local rate
  rate="$("$python" - "$out" <<'PY'
import glob, json, statistics, sys
out = sys.argv[1]
files = glob.glob(f"{out}/members/*/metrics.jsonl") or [f"{out}/metrics.jsonl"]
rates = []
for f in files:
    rows = [json.loads(line) for line in open(f)]
    rates += [r["samples_per_s"] for r in rows[1:]]
print(statistics.median(rates))
PY
)"
  local batch
  batch="$(grep -o 'global batch [0-9]*' "$out/plan.txt" | head -1 | awk '{print $3}')"
  echo "$batch|$rate"
}

# The machine's speed drifts by tens of percent over minutes, so the cases of each calibration
# (1 and 2 ranks on the 2-rank one, 4 ranks on the 4-rank one) run between two calibrations, and
# each case is predicted with both: the mean is what the table compares.
for n in 2 4; do
  calibrate "$n" "$work/before_$n.json"
  measured=()
  for entry in "${cases[@]}"; do
    IFS='|' read -r name ranks overrides <<<"$entry"
    [ $((ranks < 2 ? 2 : ranks)) -eq "$n" ] || continue
    sets=("${common[@]}")
    for o in $overrides; do sets+=(--set "$o"); done
    result="$(measure "$ranks" "$work/run_$((${#rows[@]} + ${#measured[@]}))" "${sets[@]}")"
    measured+=("$entry|$result")
  done
  calibrate "$n" "$work/after_$n.json"
  for m in "${measured[@]}"; do
    IFS='|' read -r name ranks overrides batch rate <<<"$m"
    sets=("${common[@]}")
    for o in $overrides; do sets+=(--set "$o"); done
    before="$(predict "$ranks" "$work/before_$n.json" "${sets[@]}")"
    after="$(predict "$ranks" "$work/after_$n.json" "${sets[@]}")"
    rows+=("$name|$before|$after|$batch|$rate")
    echo "[bench] $name: predicted $before ms (calibration before) and $after ms (after)," \
      "measured at $rate samples/s (batch $batch)" >&2
  done
done

"$python" - "$config" "$work"/{before,after}_{2,4}.json "${rows[@]}" <<'PY'
import json, sys
config = sys.argv[1]
before2, before4, after2, after4 = (json.load(open(f)) for f in sys.argv[2:6])
def shared(c):
    node = c['intra_node']
    return (f"{node['ranks']} ranks: MPI {node['latency_s'] * 1e6:.2f} us, "
            f"{node['bytes_per_s'] / 1e9:.1f} GB/s, with all stepping "
            + ", ".join(f"{s['step_s'] * 1e3:.2f} ms on {s['threads']} thread(s)"
                        for s in node['shared_steps'])
            + (f", as replica pairs {node['replica_pairs_step']['step_s'] * 1e3:.2f} ms"
               if 'replica_pairs_step' in node else "")
            + (f", split in pairs {c['split_over_2']['all_pairs_step_s'] * 1e3:.2f} ms"
               + (f" (the slower of two pairs {slower(c['split_over_2']['all_pairs_spread']):.2f}x"
                  " the mean)" if 'all_pairs_spread' in c['split_over_2'] else "")
               if 'all_pairs_step_s' in c.get('split_over_2', {}) else ""))
def slower(spread):  # the expected larger of two draws over the mean, as strata plan takes it
    x = sorted(spread)
    return sum(v * (2 * i + 1) for i, v in enumerate(x)) / len(x) ** 2 / (sum(x) / len(x))
alone = lambda c: f"{c['steps'][0]['step_s'] * 1e3:.2f}"
print(f"strata plan --predict --network local against strata run, {config.split('/')[-1]}, local "
      f"batch {before2['local_batch']}, on {before2['cpu']} ({before2['cores']} cores). "
      f"Calibrated before and after the cases of each: one-thread step alone {alone(before2)} and "
      f"{alone(after2)} ms (2 ranks), {alone(before4)} and {alone(after4)} ms (4 ranks); before "
      f"them, {shared(before2)}; {shared(before4)}.\n")
print("| ranks | predicted step ms (calibration before / after) | mean | measured step ms "
      "| predicted / measured | within 15% |")
print("| --- | --- | --- | --- | --- | --- |")
worst = worst_alone = 0.0
for row in sys.argv[6:]:
    name, before, after, batch, rate = row.split("|")
    before, after = float(before), float(after)
    measured = 1e3 * int(batch) / float(rate)
    ratio = (before + after) / 2 / measured
    worst = max(worst, abs(ratio - 1))
    worst_alone = max(worst_alone, abs(before / measured - 1), abs(after / measured - 1))
    print(f"| {name} | {before:.2f} / {after:.2f} | {(before + after) / 2:.2f} | {measured:.2f} | "
          f"{ratio:.2f} | {'yes' if abs(ratio - 1) <= 0.15 else 'no'} |")
print(f"\nLargest error: {100 * worst:.0f}% (goal: within 15%); with either calibration alone, "
      f"{100 * worst_alone:.0f}%.")
PY
