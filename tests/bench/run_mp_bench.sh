#!/usr/bin/env bash
# Per-step time of the benchmark CNN with M=2 model parallelism against M=1, on 2 ranks of one thread.
#   tests/bench/run_mp_bench.sh [BUILD_DIR] [ROUNDS]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-${STRATA_BUILD_DIR:-$root/build}}"
rounds="${2:-5}"
cmake --build "$build" --target strata_bench_model_parallel -j "$(nproc)" >&2
# shellcheck source=../../jobs/env.sh
. "$root/jobs/env.sh"
mpiexec="$(command -v mpiexec.mpich || command -v mpiexec)"
exec "$mpiexec" -n 2 "$build/strata_bench_model_parallel" "$rounds"
