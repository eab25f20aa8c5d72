#!/usr/bin/env bash
# NCCL allreduce bus bandwidth of strata's NCCL paths against raw NCCL calls, one GPU per rank.
#   tests/bench/run_nccl_bench.sh [BUILD_DIR] [RANKS] [REPEATS]
# RANKS defaults to the GPUs the CUDA runtime sees (nvidia-smi), at least 1. Exits 77 without a GPU.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-${STRATA_BUILD_DIR:-$root/build}}"
gpus="$(nvidia-smi --list-gpus 2>/dev/null | wc -l || true)"
ranks="${2:-$(( gpus > 0 ? gpus : 1 ))}"
repeats="${3:-20}"
cmake --build "$build" --target strata_bench_nccl_allreduce -j "$(nproc)" >&2 ||
  { echo "run_nccl_bench.sh: no strata_bench_nccl_allreduce target: is $build a CUDA build?" >&2; exit 1; }
mpiexec="$(command -v mpiexec.mpich || command -v mpiexec)"
exec "$mpiexec" -n "$ranks" "$build/strata_bench_nccl_allreduce" "$repeats"
