#!/usr/bin/env bash
# Installs strata's Debian 12 build and run dependencies; the one place that does.
# On a machine where it cannot or should not install (not root, not Debian, Cray modules),
# it installs nothing, names what is missing and how to point CMake at a site's own libraries.
set -euo pipefail

# package -> a file whose presence shows it is installed
declare -A probe=(
  [mpich]=/usr/bin/mpiexec.mpich
  [libmpich-dev]=/usr/bin/mpicxx.mpich
  [libhdf5-mpich-dev]=/usr/include/hdf5/mpich/hdf5.h
  [hdf5-tools]=/usr/bin/h5dump
  [libyaml-cpp-dev]=/usr/include/yaml-cpp/yaml.h
  [catch2]=/usr/include/catch2/catch.hpp
  [libdnnl-dev]=/usr/include/dnnl.hpp
  [dataset-fashion-mnist]=/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
  [libcli11-dev]=/usr/include/CLI/CLI.hpp
  [libfmt-dev]=/usr/include/fmt/format.h
  [nlohmann-json3-dev]=/usr/include/nlohmann/json.hpp
  [zlib1g-dev]=/usr/include/zlib.h
  [cmake]=/usr/bin/cmake
  [g++]=/usr/bin/g++
  [python3-h5py]=/usr/lib/python3/dist-packages/h5py/__init__.py
)
# Only the job-script tests need these; they are installed without recommends.
declare -A slurm_probe=(
  [slurmctld]=/usr/sbin/slurmctld
  [slurmd]=/usr/sbin/slurmd
  [slurm-client]=/usr/bin/sbatch
  [munge]=/usr/sbin/munged
)

# Only the report test needs a browser: it renders `strata report`'s page headless.
declare -A browser_probe=(
  [chromium]=/usr/bin/chromium
)

want_slurm=0
want_torch=0
want_deap=0
want_optuna=0
want_browser=0
for arg in "$@"; do
  case "$arg" in
    --with-slurm) want_slurm=1 ;;
    --with-torch) want_torch=1 ;;
    --with-deap) want_deap=1 ;;
    --with-optuna) want_optuna=1 ;;
    --with-browser) want_browser=1 ;;
    *) echo "install_deps.sh: unknown option '$arg' (known: --with-slurm --with-torch --with-deap --with-optuna --with-browser)" >&2; exit 2 ;;
  esac
done

missing=()
for pkg in "${!probe[@]}"; do [ -e "${probe[$pkg]}" ] || missing+=("$pkg"); done
missing_slurm=()
if [ $want_slurm = 1 ]; then
  for pkg in "${!slurm_probe[@]}"; do [ -e "${slurm_probe[$pkg]}" ] || missing_slurm+=("$pkg"); done
fi
if [ $want_browser = 1 ]; then
  for pkg in "${!browser_probe[@]}"; do [ -e "${browser_probe[$pkg]}" ] || missing+=("$pkg"); done
fi
# Debian's interpreter, not whatever python3 comes first on PATH (pyenv, conda), which cannot see python3-torch.
if [ $want_torch = 1 ] && ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  missing+=(python3-torch)
fi
# Debian's torch calls whatever libblas.so.3 the alternatives give; with nothing else installed that
# is the reference BLAS (8 GFLOP/s), and the benchmark's PyTorch side would run 20-60x too slow.
if [ $want_torch = 1 ] && [ ! -e /usr/lib/x86_64-linux-gnu/openblas-pthread/libblas.so.3 ]; then
  missing+=(libopenblas0-pthread)
fi
# DEAP: the genetic-search benchmark's peer (tests/bench/run_ga_suite_bench.sh).
if [ $want_deap = 1 ] && ! /usr/bin/python3 -c 'import deap' 2>/dev/null; then
  missing+=(python3-deap)
fi
# Optuna: the Fashion-MNIST search benchmark's peer (tests/bench/run_hpo_fashion_bench.sh).
if [ $want_optuna = 1 ] && ! /usr/bin/python3 -c 'import optuna' 2>/dev/null; then
  missing+=(python3-optuna)
fi

if [ ${#missing[@]} = 0 ] && [ ${#missing_slurm[@]} = 0 ]; then
  echo "install_deps: all dependencies present"
  exit 0
fi

can_install=1
[ "$(id -u)" = 0 ] || can_install=0
grep -qs '^ID=debian' /etc/os-release || can_install=0
[ "${STRATA_NO_INSTALL:-0}" = 1 ] && can_install=0
command -v apt-get >/dev/null || can_install=0

if [ $can_install = 0 ]; then
  # Not fatal: on a module system the libraries exist where these Debian paths do not look,
  # and CMake says precisely what it cannot find.
  cat >&2 <<MSG
install_deps: not found at their Debian paths: ${missing[*]} ${missing_slurm[*]}
install_deps: not installing (not root on Debian, or STRATA_NO_INSTALL=1); going on with what the system has.
On a Cray or module system, load your site's MPI, parallel HDF5 and oneDNN (e.g. 'module load cray-mpich
cray-hdf5-parallel') and point CMake at them:
  STRATA_CMAKE_ARGS="-DMPI_CXX_COMPILER=CC -DHDF5_ROOT=\$HDF5_DIR -Ddnnl_DIR=/path/to/lib/cmake/dnnl"
MSG
  exit 0
fi

echo "install_deps: installing ${missing[*]} ${missing_slurm[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
if [ ${#missing[@]} -gt 0 ]; then
  apt-get install -y -qq "${missing[@]}" >/dev/null
fi
if [ ${#missing_slurm[@]} -gt 0 ]; then
  apt-get install -y -qq --no-install-recommends "${missing_slurm[@]}" >/dev/null
fi
if dpkg -l 'libopenmpi*' 2>/dev/null | grep -q '^ii'; then
  echo "install_deps: warning: OpenMPI is installed; strata is built with MPICH explicitly (mpicxx.mpich)" >&2
fi
echo "install_deps: done"
