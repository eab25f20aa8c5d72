#!/usr/bin/env bash
# Scheduler efficiency (busy time / (ranks x wall)) of a genetic search with uneven evaluation times
# (uniform within +-SPREAD of the mean: stragglers) on 1, 2 and 4 ranks: the generational search in
# fixed waves and dynamically scheduled, and the asynchronous (steady-state) search; the last ratio
# is asynchronous over generational-dynamic, measured in the same run. Evaluations sleep, so ranks
# may outnumber cores.   tests/bench/run_scheduler_bench.sh [BUILD_DIR] [EVAL_MEAN_S] [SPREAD]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-${STRATA_BUILD_DIR:-$root/build}}"
mean="${2:-0.03}"
spread="${3:-0.7}"
cmake --build "$build" --target strata_bench_scheduler -j "$(nproc)" >&2
mpiexec="$(command -v mpiexec.mpich || command -v mpiexec)"
echo "Genetic search, population 32 x 8 generations (249 trials), sphere in 5 dimensions; evaluation time ${mean}s +-$(/usr/bin/python3 -c "print(round(100*$spread))")% (uniform); one member group per rank."
echo
echo "| ranks | trainings gen. / async | waves efficiency | generational efficiency | asynchronous efficiency | async / gen. | waves wall s | generational wall s | asynchronous wall s |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
for ranks in 1 2 4; do
  "$mpiexec" -n "$ranks" "$build/strata_bench_scheduler" "$mean" "$spread"
done
