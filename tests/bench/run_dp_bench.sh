#!/usr/bin/env bash
# Data-parallel scaling efficiency of the benchmark CNN: 2 ranks x 1 thread against 1 rank x 1 thread,
# global batch fixed, both measured in one mpiexec -n 2 launch. Rank 0 prints a Markdown table.
#
#   tests/bench/run_dp_bench.sh [BUILD_DIR] [-- extra strata_bench_data_parallel options]
#
# The gradients are summed as parallel.allreduce: auto sums them for 2 replicas on one node,
# through the shared window; `-- --allreduce mpi` measures the bucketed MPI allreduce instead.
#
# BUILD_DIR (or $STRATA_BUILD_DIR) defaults to build/; it must be configured already.
# The target is built if needed.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${STRATA_BUILD_DIR:-$root/build}"
if [ $# -gt 0 ] && [ "$1" != "--" ]; then build="$1"; shift; fi
[ "${1:-}" = "--" ] && shift

if [ ! -f "$build/CMakeCache.txt" ]; then
  echo "run_dp_bench.sh: $build is not a configured build directory; configure it first, e.g." >&2
  echo "  cmake -S $root -B $build -DMPI_CXX_COMPILER=mpicxx.mpich -DMPIEXEC_EXECUTABLE=/usr/bin/mpiexec.mpich" >&2
  exit 1
fi
cmake --build "$build" --target strata_bench_data_parallel -j "$(nproc)" >&2

# OMP_WAIT_POLICY: idle OpenMP threads must not spin against the ranks.
if [ -f "$root/jobs/env.sh" ]; then
  # shellcheck source=../../jobs/env.sh
  . "$root/jobs/env.sh"
fi
# One thread per rank on both sides (the Trainer runs single-threaded kernels with threads=1;
# these keep any library pool from starting more).
export OMP_NUM_THREADS=1

mpiexec="$(command -v mpiexec.mpich || command -v mpiexec)"
exec "$mpiexec" -n 2 "$build/strata_bench_data_parallel" "$@"
