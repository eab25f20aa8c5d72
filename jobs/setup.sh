#!/usr/bin/env bash
# Shared set-up of jobs/quickstart.sh and jobs/test.sh: install what is missing, configure, build,
# and import Fashion-MNIST into data/fashion_mnist.h5. Idempotent: a second call only rebuilds what changed.
# Environment: STRATA_BUILD_DIR (default build), STRATA_CMAKE_ARGS (extra CMake arguments, e.g. a site's
# MPI/HDF5/BLAS), STRATA_NO_INSTALL=1 (never run apt-get), STRATA_INSTALL_ARGS (e.g. --with-slurm).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
build="${STRATA_BUILD_DIR:-build}"

echo "== strata setup: dependencies"
# shellcheck disable=SC2086
jobs/install_deps.sh ${STRATA_INSTALL_ARGS:-}

echo "== strata setup: configure and build in $build/"
if [ ! -f "$build/CMakeCache.txt" ]; then
  mpi_args=()
  if command -v mpicxx.mpich >/dev/null; then
    # Debian's MPICH by name, so that an OpenMPI installed later cannot take over mpicxx/mpiexec.
    mpi_args=(-DMPI_CXX_COMPILER=mpicxx.mpich -DMPIEXEC_EXECUTABLE=/usr/bin/mpiexec.mpich)
  fi
  # shellcheck disable=SC2086
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release "${mpi_args[@]}" ${STRATA_CMAKE_ARGS:-}
fi
cmake --build "$build" -j "$(nproc)"

if [ ! -f data/fashion_mnist.h5 ]; then
  echo "== strata setup: importing Fashion-MNIST into data/fashion_mnist.h5"
  "$build/strata" data import-idx /usr/share/datasets/fashion-mnist data/fashion_mnist.h5
fi
