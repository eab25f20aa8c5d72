#!/usr/bin/env bash
# Scheduler efficiency (busy time / (ranks x wall)) of a genetic search with uneven evaluation times,
# dynamic scheduling against fixed waves, on 1, 2 and 4 ranks (evaluations sleep, so ranks may
# outnumber cores).   tests/bench/run_scheduler_bench.sh [BUILD_DIR] [EVAL_MEAN_S] [EVAL_STDDEV_S]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-${STRATA_BUILD_DIR:-$root/build}}"
mean="${2:-0.03}"
stddev="${3:-0.02}"
cmake --build "$build" --target strata_bench_scheduler -j "$(nproc)" >&2
mpiexec="$(command -v mpiexec.mpich || command -v mpiexec)"
echo "Genetic search, population 32 x 4 generations, sphere in 5 dimensions, evaluation time mean ${mean}s, stddev ${stddev}s; one member group per rank."
echo
echo "| ranks | trials | dynamic efficiency | waves efficiency | dynamic wall s | waves wall s |"
echo "| --- | --- | --- | --- | --- | --- |"
for ranks in 1 2 4; do
  "$mpiexec" -n "$ranks" "$build/strata_bench_scheduler" "$mean" "$stddev"
done
