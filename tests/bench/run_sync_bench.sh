#!/usr/bin/env bash
# Gradient-sync bus bandwidth of strata's bucketed allreduce against raw MPI_Allreduce, on 2 ranks.
#   tests/bench/run_sync_bench.sh [BUILD_DIR] [RANKS] [REPEATS] [WATCHDOG_S]
# WATCHDOG_S: the stall watchdog's limit (300 by default, as in `strata run`; 0 = none).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-${STRATA_BUILD_DIR:-$root/build}}"
ranks="${2:-2}"
repeats="${3:-50}"
watchdog="${4:-300}"
cmake --build "$build" --target strata_bench_gradient_sync -j "$(nproc)" >&2
mpiexec="$(command -v mpiexec.mpich || command -v mpiexec)"
exec "$mpiexec" -n "$ranks" "$build/strata_bench_gradient_sync" "$repeats" "$watchdog"
