#!/usr/bin/env bash
# strata's training step on one GPU against PyTorch on the same GPU, in the same run: the benchmark
# CNN (configs/fashion_cnn.yaml's layers) and an MLP 784-512-256-10, SGD momentum 0.9, batches of
# synthetic 1x28x28 data uploaded from host memory every step on both sides. Prints a Markdown
# table with the ratio strata / PyTorch per row. Needs a CUDA build, a GPU, and a torch with CUDA
# for $STRATA_TORCH_PYTHON (default /usr/bin/python3).
#
#   tests/bench/run_gpu_bench.sh [BUILD_DIR] [-- extra strata_bench_gpu_training options]
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${STRATA_BUILD_DIR:-$root/build}"
if [ $# -gt 0 ] && [ "$1" != "--" ]; then build="$1"; shift; fi
[ "${1:-}" = "--" ] && shift
python="${STRATA_TORCH_PYTHON:-/usr/bin/python3}"
# A configured build directory is brought up to date; a folder of prebuilt programs (the GPU
# machine's bundle, tests/gpu/make_device_bundle.sh) is taken as it is.
if [ -f "$build/CMakeCache.txt" ]; then
  cmake --build "$build" --target strata_bench_gpu_training -j "$(nproc)" >&2 ||
    { echo "run_gpu_bench.sh: no strata_bench_gpu_training target: is $build a CUDA build (-DSTRATA_CUDA)?" >&2; exit 1; }
fi
rc=0
strata_rows="$("$build/strata_bench_gpu_training" "$@")" || rc=$?
if [ "$rc" = 77 ]; then echo "run_gpu_bench.sh: the CUDA runtime sees no GPU here" >&2; exit 77; fi
[ "$rc" = 0 ] || exit "$rc"
torch_rows=""
while read -r model batch; do
  torch_rows+="$("$python" "$root/tests/bench/torch_reference.py" --device cuda --model "$model" --batch "$batch")"$'\n'
done < <("$python" -c 'import json,sys; [print(r["model"], r["batch"]) for r in map(json.loads, sys.stdin)]' <<<"$strata_rows")
"$python" - "$strata_rows" "$torch_rows" <<'PY'
import json, sys
strata = [json.loads(l) for l in sys.argv[1].splitlines() if l.strip()]
torch = {(r["model"], r["batch"]): r for r in (json.loads(l) for l in sys.argv[2].splitlines() if l.strip())}
names = {"cnn": "CNN conv5x5x32-pool-conv5x5x64-pool-fc256-fc10", "mlp": "MLP 784-512-256-10"}
print(f"One GPU: strata on {strata[0]['device']}, PyTorch {next(iter(torch.values()))['torch']} on "
      f"{next(iter(torch.values()))['device']}; median of 3 repeats.\n")
print("| model | batch | strata samples/s | PyTorch samples/s | ratio |")
print("| --- | --- | --- | --- | --- |")
for r in strata:
    t = torch[r["model"], r["batch"]]
    print(f"| {names[r['model']]} | {r['batch']} | {r['samples_per_s']:,.0f} | "
          f"{t['samples_per_s']:,.0f} | {r['samples_per_s'] / t['samples_per_s']:.2f} |")
PY
