#!/usr/bin/env bash
# The cost model against measured step times on this machine: for layouts of 1, 2 and 4 local
# ranks, the step time `strata plan --predict --network local` gives and the one `strata run`
# measures (training samples/s of the epochs after the first, global batch / samples/s; the median
# over epochs and members). The prediction uses strata calibrate under mpiexec -n 2 or -n 4 (as
# many ranks as the layout; 1: the 2-rank one), which times MPI between its ranks and a one-thread
# step on all of them at once; the layouts it serves run in passes (STRATA_BENCH_PASSES, default
# 2) of trainings of STRATA_BENCH_EPOCHS epochs (default 4), with a calibration before each pass
# and after the last, and the prediction is the mean over the calibrations. Prints a Markdown
# table with each ratio; goal: within 15%.
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
# A case's steps measured by strata run: "batch|samples/s,samples/s,..." (each epoch after the
# first, of each member).
measure() {  # ranks, output dir, --set options...
  local ranks="$1" out="$2"
  shift 2
  "$mpiexec" -n "$ranks" "$strata" run "$config" --fresh "$@" --set "training.epochs=$epochs" \
    --set "output.dir=$out" > "$out.log" 2>&1 || { tail "$out.log" >&2; exit 1; }
  local rates
  rates="$("$python" - "$out" <<'PY'
import glob, json, sys
out = sys.argv[1]
files = glob.glob(f"{out}/members/*/metrics.jsonl") or [f"{out}/metrics.jsonl"]
rates = []
for f in files:
    rows = [json.loads(line) for line in open(f)]
    rates += [r["samples_per_s"] for r in rows[1:]]
print(",".join(f"{r:.0f}" for r in rates))
PY
)"
  local batch
  batch="$(grep -o 'global batch [0-9]*' "$out/plan.txt" | head -1 | awk '{print $3}')"
  echo "$batch|$rates"
}

# The machine's speed drifts by tens of percent over minutes, and a slow minute can take all the
# epochs of one training. So the cases of each calibration (1 and 2 ranks on the 2-rank one, 4
# ranks on the 4-rank one) run in $passes passes, a calibration before each pass and after the
# last; a case's measured step is the median over the epochs of all its passes, and its
# prediction the mean of those from every calibration.
passes="${STRATA_BENCH_PASSES:-2}"
epochs="${STRATA_BENCH_EPOCHS:-4}"
calibrations=()
for n in 2 4; do
  names=() rank_counts=() case_sets=() batches=() case_rates=()
  for entry in "${cases[@]}"; do
    IFS='|' read -r name ranks overrides <<<"$entry"
    [ $((ranks < 2 ? 2 : ranks)) -eq "$n" ] || continue
    names+=("$name") rank_counts+=("$ranks") case_sets+=("$overrides") case_rates+=("")
  done
  for pass in $(seq 0 "$passes"); do
    calibrate "$n" "$work/calibration_${n}_$pass.json"
    calibrations+=("$work/calibration_${n}_$pass.json")
    [ "$pass" -lt "$passes" ] || break
    for i in "${!names[@]}"; do
      sets=("${common[@]}")
      for o in ${case_sets[$i]}; do sets+=(--set "$o"); done
      result="$(measure "${rank_counts[$i]}" "$work/run_${n}_${pass}_$i" "${sets[@]}")"
      batches[i]="${result%%|*}"
      case_rates[i]="${case_rates[$i]:+${case_rates[$i]},}${result#*|}"
    done
  done
  for i in "${!names[@]}"; do
    sets=("${common[@]}")
    for o in ${case_sets[$i]}; do sets+=(--set "$o"); done
    predictions=()
    for pass in $(seq 0 "$passes"); do
      predictions+=("$(predict "${rank_counts[$i]}" "$work/calibration_${n}_$pass.json" "${sets[@]}")")
    done
    joined="$(IFS=/; echo "${predictions[*]}")"
    rows+=("${names[$i]}|$joined|${batches[$i]}|${case_rates[$i]}")
    echo "[bench] ${names[$i]}: predicted $joined ms (each calibration), measured at" \
      "${case_rates[$i]} samples/s (batch ${batches[$i]})" >&2
  done
done

"$python" - "$config" "$passes" "${calibrations[@]}" -- "${rows[@]}" <<'PY'
import json, statistics, sys
config, passes = sys.argv[1], int(sys.argv[2])
split = sys.argv.index("--")
calibrations = [json.load(open(f)) for f in sys.argv[3:split]]
two, four = calibrations[: passes + 1], calibrations[passes + 1 :]
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
alone = lambda cs: " / ".join(f"{c['steps'][0]['step_s'] * 1e3:.2f}" for c in cs)
print(f"strata plan --predict --network local against strata run, {config.split('/')[-1]}, local "
      f"batch {two[0]['local_batch']}, on {two[0]['cpu']} ({two[0]['cores']} cores); "
      f"{passes} pass(es) over the cases, a calibration before each and after the last. "
      f"One-thread step alone in each calibration: {alone(two)} ms (2 ranks), {alone(four)} ms "
      f"(4 ranks); in the first, {shared(two[0])}; {shared(four[0])}.\n")
print("| ranks | predicted step ms (each calibration) | mean | measured step ms (median of "
      "epochs) | predicted / measured | within 15% |")
print("| --- | --- | --- | --- | --- | --- |")
worst = worst_alone = 0.0
for row in sys.argv[split + 1:]:
    name, predictions, batch, rates = row.split("|")
    predictions = [float(p) for p in predictions.split("/")]
    measured = 1e3 * int(batch) / statistics.median(float(r) for r in rates.split(","))
    mean = sum(predictions) / len(predictions)
    ratio = mean / measured
    worst = max(worst, abs(ratio - 1))
    worst_alone = max([worst_alone] + [abs(p / measured - 1) for p in predictions])
    print(f"| {name} | {' / '.join(f'{p:.2f}' for p in predictions)} | {mean:.2f} | "
          f"{measured:.2f} | {ratio:.2f} | {'yes' if abs(ratio - 1) <= 0.15 else 'no'} |")
print(f"\nLargest error: {100 * worst:.0f}% (goal: within 15%); with any one calibration alone, "
      f"{100 * worst_alone:.0f}%.")
PY
