#!/usr/bin/env bash
# Checkpoint write and read MB/s against dd of the same bytes on the same disk, and the training
# pause per checkpoint, for the Fashion CNN (1 rank) and a ~100M-parameter model split M=2 (2 ranks).
#   tests/bench/run_checkpoint_bench.sh [DIR] [ROUNDS] [BUILD_DIR]
# As root it drops the page cache before each read, so that reads come from the disk.
# DIR (default runs/bench-checkpoint) must be on the disk to measure; the big model needs ~4 GB there.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
dir="${1:-$root/runs/bench-checkpoint}"
rounds="${2:-5}"
build="${3:-${STRATA_BUILD_DIR:-$root/build}}"
cmake --build "$build" --target strata_bench_checkpoint -j "$(nproc)" >&2
source "$root/jobs/env.sh"
mpiexec="$(command -v mpiexec.mpich || command -v mpiexec)"
"$mpiexec" -n 1 "$build/strata_bench_checkpoint" cnn "$dir" "$rounds"
"$mpiexec" -n 2 "$build/strata_bench_checkpoint" big "$dir" "$rounds"
