#!/usr/bin/env bash
# The GPU checks, on a machine with a GPU but none of strata's Debian packages (the lent CUDA
# machines): unpacks the bundle of tests/gpu/make_device_bundle.sh and runs, each under a time
# limit, the gpu unit tests, the Fashion-MNIST GPU training against the CPU (tests/e2e/gpu_train.sh,
# when the bundle carries the data), four CPU end-to-end tests with their trainings on the GPU
# (checkpoints, transfer, PBT, the combined workflow), the split-model test with two ranks sharing
# the GPU, the multi-GPU tests when there are two GPUs or more, the training benchmark against
# PyTorch on the same GPU, the NCCL bandwidth benchmark, and the whole Fashion-MNIST CNN training
# on the GPU and on the CPU (tests/bench/run_gpu_fashion_bench.sh), and the cost model against
# CPU steps measured on the machine's cores (tests/bench/run_cost_model_bench.sh). Run from the repo
# root (the benchmarks read configs/ and tests/bench/ there):
#
#   tests/gpu/device_checks.sh [BUNDLE]     (default .device/strata-gpu.tar.xz)
#
# The limits keep the whole run inside about 10 minutes, so that a lent machine's 15 minutes leave
# room for a second try.
#
# Three files go to $OUT, else ./device-checks/: machine.txt (the GPUs, the libraries found),
# summary.txt (one line per check with its exit status; 77 = skipped) and checks.log (every check's
# output, one after another). STRATA_TORCH_PYTHON names the Python with a CUDA torch (default
# python3).
set -uo pipefail
root="$(pwd)"
bundle="${1:-.device/strata-gpu.tar.xz}"
out="${OUT:-$root/device-checks}"
mkdir -p "$out"
dir="$(mktemp -d /tmp/strata-gpu.XXXXXX)"
xz -dc "$bundle" | tar -C "$dir" -xf - || { echo "cannot unpack $bundle" >&2; exit 1; }
python="${STRATA_TORCH_PYTHON:-python3}"
# CUDA's libraries: the toolkit's where there is one, and the Python nvidia-* wheels' (cuDNN and
# NCCL often come only that way).
wheel_libs="$("$python" - <<'PY' 2>/dev/null
import glob, os
try:
    import nvidia
    roots = list(nvidia.__path__)
except ImportError:
    roots = []
# nvidia/<library>/lib (CUDA 12 wheels) or nvidia/cu13/lib (CUDA 13 ones): any folder of .so files.
print(":".join(sorted({os.path.dirname(p) for r in roots
                       for p in glob.glob(r + "/**/lib*.so*", recursive=True)})))
PY
)"
export LD_LIBRARY_PATH="$dir/lib:${wheel_libs}:/usr/local/cuda/lib64:/usr/local/cuda/lib:${LD_LIBRARY_PATH:-}"
ln -sf mpiexec.hydra "$dir/bin/mpiexec"  # the e2e scripts look for mpiexec.mpich or mpiexec
export PATH="$dir/bin:$PATH"
export HYDRA_LAUNCHER=fork OMP_WAIT_POLICY=PASSIVE STRATA_TORCH_PYTHON="$python"
# The e2e tests' Python needs h5py and numpy, which the machine's torch Python has.
export STRATA_TEST_PYTHON="$python"
gpus="$(nvidia-smi --list-gpus 2>/dev/null | wc -l)"
{ nvidia-smi -L; nproc; echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"; ldd "$dir/bin/strata_gpu_tests"
} > "$out/machine.txt" 2>&1
: > "$out/summary.txt"
if grep -q '=> not found' "$out/machine.txt"; then
  echo "libraries: exit 1 (missing: $(grep '=> not found' "$out/machine.txt" | awk '{print $1}' | xargs))" |
    tee -a "$out/summary.txt" >&2
fi
# The e2e scripts read data/ at the repo root.
if [ -f "$dir/fashion_mnist.h5.xz" ] && [ ! -f "$root/data/fashion_mnist.h5" ]; then
  mkdir -p "$root/data" && xz -dc "$dir/fashion_mnist.h5.xz" > "$root/data/fashion_mnist.h5"
fi

check() {  # check NAME SECONDS COMMAND...; STRATA_DEVICE_CHECKS="NAME ..." runs only those named
  local name="$1" seconds="$2"
  shift 2
  [[ -z "${STRATA_DEVICE_CHECKS:-}" || " $STRATA_DEVICE_CHECKS " == *" $name "* ]] || return 0
  echo "== $name" >&2
  timeout "$seconds" "$@" > "$dir/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc" | tee -a "$out/summary.txt" >&2
  # One file for all the logs: the device tool brings back at most 8 files, and a run cut short
  # still returns the logs of the checks that ended.
  { echo "===== $name: exit $rc"; cat "$dir/$name.log"; } >> "$out/checks.log"
  tail -n 4 "$dir/$name.log" >&2
}

check gpu_tests 120 strata_gpu_tests --durations yes
if [ -f "$root/data/fashion_mnist.h5" ]; then
  check e2e_gpu_train 150 bash tests/e2e/gpu_train.sh "$dir/bin/strata"
fi
check split_shared_gpu 90 mpiexec.hydra -n 2 strata_gpu_shared_tests
if [ -f "$root/data/fashion_mnist.h5" ]; then
  # CPU end-to-end tests where run.device auto means the GPU (up to 4 ranks sharing it): a
  # training killed (mid-write too) and resumed bit-identically, PBT killed and resumed, transfer
  # with a frozen trunk, the search -> ensemble -> transfer workflow; every training must run on
  # the GPU. (run_predict and hpo_resume assume the CPU: predict matching the run's accuracy to the
  # bit, and a signal reaching a search before it ends.)
  STRATA_E2E_EXPECT_GPU=1 check e2e_on_gpu 300 bash -c 'rc=0
    for t in checkpoint_resume transfer_run pbt_resume combined_run; do
      echo "== $t"; bash "tests/e2e/$t.sh" "$0" || rc=1
    done
    exit $rc' "$dir/bin/strata"
fi
if [ "$gpus" -ge 2 ]; then
  check gpu_mpi_n2 120 mpiexec.hydra -n 2 strata_gpu_mpi_tests
  [ "$gpus" -ge 4 ] && check gpu_model_parallel_n4 120 mpiexec.hydra -n 4 strata_gpu_mpi_tests '[model_parallel]'
fi
check gpu_bench 180 tests/bench/run_gpu_bench.sh "$dir/bin" -- --cnn-config "$root/configs/fashion_cnn.yaml"
check nccl_bench 45 mpiexec.hydra -n "$(( gpus > 0 ? gpus : 1 ))" strata_bench_nccl_allreduce 20
if [ -f "$root/data/fashion_mnist.h5" ]; then
  check fashion_bench 200 tests/bench/run_gpu_fashion_bench.sh "$dir/bin/strata"
  # The cost model on a node with more cores than ranks (CPU steps; the development machines
  # have 2 cores, where 4 ranks are oversubscribed); one pass over the layouts, to fit the limits.
  check cost_model_bench 300 env STRATA_BENCH_PASSES=1 tests/bench/run_cost_model_bench.sh "$dir/bin"
fi
grep -c ": exit 0$" "$out/summary.txt" | xargs -I{} echo "{} of $(wc -l < "$out/summary.txt") checks passed" >&2
