#!/usr/bin/env bash
# Single-rank training benchmark: strata against PyTorch in the same run, plus the sgemm peak.
# Prints a Markdown block for the README on stdout (progress goes to stderr).
#
#   tests/bench/run_training_bench.sh [BUILD_DIR] [-- extra strata_bench_training options]
#
# BUILD_DIR (or $STRATA_BUILD_DIR) defaults to build/; it must be configured already.
# The target is built if needed. $STRATA_TORCH_PYTHON names the interpreter with torch
# (default /usr/bin/python3: Debian's, which has torch; a pyenv python3 on PATH does not).
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${STRATA_BUILD_DIR:-$root/build}"
if [ $# -gt 0 ] && [ "$1" != "--" ]; then build="$1"; shift; fi
[ "${1:-}" = "--" ] && shift

python="${STRATA_TORCH_PYTHON:-/usr/bin/python3}"
export STRATA_TORCH_PYTHON="$python"

# Fail before building anything when the reference cannot run.
if ! "$python" -c 'import torch' 2>/dev/null; then
  echo "run_training_bench.sh: $python cannot import torch; the benchmark compares against PyTorch." >&2
  echo "  Install it with: jobs/install_deps.sh --with-torch   (or set STRATA_TORCH_PYTHON)" >&2
  exit 1
fi

# Debian's torch calls libblas.so.3; the reference BLAS there would make PyTorch 20-60x slower.
blas="$(ldconfig -p 2>/dev/null | awk '$1 == "libblas.so.3" {print $NF; exit}')"
blas="$(readlink -f "${blas:-/nonexistent}" 2>/dev/null || true)"
if [[ "$python" == /usr/bin/python3 && "$blas" != *openblas* ]]; then
  echo "run_training_bench.sh: libblas.so.3 is ${blas:-missing}, not OpenBLAS: PyTorch would run on the reference BLAS." >&2
  echo "  Install it with: jobs/install_deps.sh --with-torch" >&2
  exit 1
fi

if [ ! -f "$build/CMakeCache.txt" ]; then
  echo "run_training_bench.sh: $build is not a configured build directory; configure it first, e.g." >&2
  echo "  cmake -S $root -B $build -DMPI_CXX_COMPILER=mpicxx.mpich -DMPIEXEC_EXECUTABLE=/usr/bin/mpiexec.mpich" >&2
  exit 1
fi
cmake --build "$build" --target strata_benchmarks -j "$(nproc)" >&2

# Both libraries read these when they load, so they must be set before either process starts.
# PyTorch's dense layers run on OpenBLAS, which without OPENBLAS_CORETYPE picks its Prescott
# kernels on these VMs, and torch's OpenMP threads spin against OpenBLAS's: torch's MLP would run
# 4-5x slower and the ratio would flatter strata (strata itself runs on oneDNN, which needs neither).
if [ -f "$root/jobs/env.sh" ]; then
  # shellcheck source=../../jobs/env.sh
  . "$root/jobs/env.sh"
fi
# The peer gets its best kernels: on an AVX-512 CPU OpenBLAS's SkylakeX ones, also over a weaker
# preset (these machines export Haswell, which runs torch's sgemm at 60% of SkylakeX's rate).
if grep -qw avx512f /proc/cpuinfo; then export OPENBLAS_CORETYPE=SkylakeX; fi
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-PASSIVE}"

exec "$build/strata_bench_training" "$@"
