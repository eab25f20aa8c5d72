#!/usr/bin/env bash
# What output.trace costs: the benchmark CNN (configs/fashion_cnn.yaml's layers) on synthetic
# Fashion-MNIST-shaped data, one rank with THREADS worker threads (every layer of every worker is
# traced), trained with and without the trace in alternation, REPEATS times each (default 10), in
# one run of this script, the order of each pair swapped every other repeat (off-on, on-off, ...)
# so that a machine speeding up or slowing down over the run favours neither side. Prints each
# side's median training samples/s and their ratio (goal: overhead < 2%). Then, since on a noisy
# machine that ratio resolves a few percent at best, the overhead from its parts:
# strata_bench_trace_events times one event with THREADS threads recording at once, and the
# traced run's events at that cost are set against the untraced runs' time for the same training.
#
#   tests/bench/run_trace_bench.sh [BUILD_DIR] [REPEATS] [THREADS]
# BUILD_DIR is a build tree (strata and strata_bench_trace_events are built first) or a directory
# that holds both binaries.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-${STRATA_BUILD_DIR:-$root/build}}"
repeats="${2:-10}"
threads="${3:-2}"
if [ -f "$build/CMakeCache.txt" ]; then
  cmake --build "$build" --target strata strata_bench_trace_events -j "$(nproc)" >&2
fi
[ -x "$build/strata_bench_trace_events" ] ||
  { echo "run_trace_bench.sh: $build has no strata_bench_trace_events; pass a build tree" >&2; exit 1; }
if [ -f "$root/jobs/env.sh" ]; then
  # shellcheck source=../../jobs/env.sh
  . "$root/jobs/env.sh"
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

layers="$(sed -n '/^model:/,/^training:/p' "$root/configs/fashion_cnn.yaml" | sed '$d')"
grep -q 'conv2d: {filters: 32' <<<"$layers" ||
  { echo "run_trace_bench.sh: configs/fashion_cnn.yaml no longer has the layers this script reads" >&2; exit 1; }
train=8192 epochs=2
config() {  # $1: output dir, $2: trace true|false
  cat <<YAML
run: {name: trace_bench, seed: 1, threads: $threads}
data: {source: synthetic, validation_fraction: 0.0, synthetic: {train: $train, test: 64, classes: 10, channels: 1, height: 28, width: 28}}
$layers
training: {epochs: $epochs, local_batch: 64, optimizer: {type: sgd, lr: 0.05, momentum: 0.9}}
output: {dir: $1, trace: $2}
YAML
}
config "$work/off" false > "$work/off.yaml"
config "$work/on" true > "$work/on.yaml"
rate() {  # the training samples/s of the run's last epoch (the first warms up)
  /usr/bin/python3 -c 'import json,sys; print(json.loads(open(sys.argv[1]).readlines()[-1])["samples_per_s"])' "$1/metrics.jsonl"
}
off=() on=()
for r in $(seq "$repeats"); do
  order="off on"
  [ $((r % 2)) -eq 0 ] && order="on off"
  for side in $order; do
    rm -rf "${work:?}/$side"
    "$build/strata" run "$work/$side.yaml" > "$work/$side.log" 2>&1 || { cat "$work/$side.log" >&2; exit 1; }
    value="$(rate "$work/$side")"
    if [ "$side" = off ]; then off+=("$value"); else on+=("$value"); fi
    echo "repeat $r, trace $side: $value samples/s" >&2
  done
done
events="$(/usr/bin/python3 -c 'import json,sys; print(sum(e.get("ph") == "X" for e in json.load(open(sys.argv[1]))["traceEvents"]))' "$work/on/trace.json")"
cost="$("$build/strata_bench_trace_events" "$threads")"
/usr/bin/python3 - "$threads" "$events" "${off[*]}" "${on[*]}" "$cost" "$((train * epochs))" "$epochs" <<'PY'
import json, statistics, sys
threads, events = sys.argv[1], int(sys.argv[2])
off, on = [float(x) for x in sys.argv[3].split()], [float(x) for x in sys.argv[4].split()]
cost, samples, epochs = json.loads(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
m_off, m_on = statistics.median(off), statistics.median(on)
print(f"output.trace on the benchmark CNN, 1 rank x {threads} threads, batch 64, last epoch of {epochs} "
      f"({samples // epochs} synthetic samples), median of {len(off)} alternating repeats (off-on, then on-off); the traced run wrote "
      f"{events} events.\n")
print("| trace | samples/s | ratio |\n| --- | --- | --- |")
print(f"| off | {m_off:.0f} | 1.000 |\n| on | {m_on:.0f} | {m_on / m_off:.3f} |")
print(f"\nOverhead: {100 * (1 - m_on / m_off):.1f}% (goal < 2%).")
# The trace's cost set against the untraced time of every epoch's training at the untraced runs'
# median rate of the last: shorter than the traced run (evaluation, the first epoch's warm-up), so
# the share is an upper bound; so is the cost, each thread's events counted at the contended rate.
untraced_s = samples / m_off
traced_cost_s = events * cost["ns_per_event"] * 1e-9
rounds = ", ".join(f"{x:.0f}" for x in cost["rounds"])
print(f"\nFrom its parts: {events} events (complete spans) in the whole traced run, at "
      f"{cost['ns_per_event']:.0f} ns each with {threads} threads recording at once "
      f"(strata_bench_trace_events, rounds {rounds} ns), against {untraced_s:.2f} s for the same "
      f"{samples} samples untraced: {100 * traced_cost_s / untraced_s:.3f}% (goal < 2%).")
PY
