#!/usr/bin/env bash
# Packs what the GPU checks need for a machine that has a GPU but none of strata's Debian packages
# (no MPICH, HDF5, oneDNN, yaml-cpp: a bare CUDA image): the gpu test and benchmark binaries,
# built for any x86-64-v3 CPU rather than this one (-march=native could stop there with an illegal
# instruction), every shared library they load except the C/C++ runtime and CUDA's own (the GPU
# machine has those), MPICH's launcher, and tests/gpu/device_checks.sh, which runs them there.
#
#   tests/gpu/make_device_bundle.sh [BUILD_DIR]     (default build-device/)
#
# Writes .device/strata-gpu.tar.xz (ignored by git; with data/fashion_mnist.h5, about 50 MB); on
# the GPU machine, from the repo root:
#   tests/gpu/device_checks.sh .device/strata-gpu.tar.xz
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-$root/build-device}"
cd "$root"
targets=(strata strata_gpu_tests strata_gpu_mpi_tests strata_gpu_shared_tests
         strata_bench_gpu_training strata_bench_nccl_allreduce)
if [ ! -f "$build/CMakeCache.txt" ]; then
  cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSTRATA_CUDA=ON -DSTRATA_NATIVE=OFF \
    -DCMAKE_CXX_FLAGS=-march=x86-64-v3 -DMPI_CXX_COMPILER=mpicxx.mpich \
    -DMPIEXEC_EXECUTABLE=/usr/bin/mpiexec.mpich >&2
fi
cmake --build "$build" --target "${targets[@]}" -j "$(nproc)" >&2

stage="$(mktemp -d)"
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib"
for t in "${targets[@]}"; do
  found="$(find "$build" -maxdepth 2 -type f -name "$t" -perm -u+x | head -n 1)"
  [ -n "$found" ] || { echo "make_device_bundle.sh: $t was not built in $build" >&2; exit 1; }
  cp "$found" "$stage/bin/"
done
# MPICH's launcher, and HDF5's h5dump and h5ls, which the e2e tests read checkpoints with.
cp /usr/bin/mpiexec.hydra /usr/bin/hydra_pmi_proxy /usr/bin/h5dump /usr/bin/h5ls "$stage/bin/"
# The C and C++ runtimes (all of glibc: its libraries share private symbols) come from the GPU
# machine's newer system, the CUDA libraries from its CUDA install (or its Python's nvidia-*
# wheels): both are newer than or the same as what was linked here. Everything else travels.
skip='^(libc|libm|libmvec|libdl|libpthread|librt|libresolv|libutil|libanl|libnsl|libnss_[a-z]+|ld-linux-x86-64|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas|libcublasLt|libcudnn.*|libnccl|libnvidia.*)\.so'
for f in "$stage"/bin/*; do
  ldd "$f" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $3}'
done | sort -u | while read -r lib; do
  name="$(basename "$lib")"
  [[ "$name" =~ $skip ]] && continue
  cp -L "$lib" "$stage/lib/$name"
done
cp tests/gpu/device_checks.sh "$stage/"
# Fashion-MNIST for the GPU training test, when jobs/setup.sh has fetched it (xz: 55 -> 26 MB).
[ -f data/fashion_mnist.h5 ] && xz -T0 -6 -c data/fashion_mnist.h5 > "$stage/fashion_mnist.h5.xz"
mkdir -p .device
tar -C "$stage" -cf - . | xz -T0 -6 > .device/strata-gpu.tar.xz
echo "wrote .device/strata-gpu.tar.xz: $(du -h .device/strata-gpu.tar.xz | cut -f1)," \
  "$(ls "$stage/bin" | wc -l) programs and $(ls "$stage/lib" | wc -l) libraries"
