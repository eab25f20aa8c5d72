#!/usr/bin/env bash
# run.device: cuda on Fashion-MNIST (label gpu): the benchmark CNN trained with its forward and
# backward passes on the GPU reaches the accuracy of the same training on the CPU, and a
# checkpoint written by the GPU run resumes on the CPU. Exits 77 (CTest: skipped) where this
# rank has no GPU to train on.
STRATA="$1"
source "$(dirname "$0")/lib.sh"
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$work"
sed -e "s|path: \.\./data/|path: $root/data/|" -e 's|dir: runs/fashion_cnn|dir: gpu|' \
    -e 's/^  epochs: 5$/  epochs: 2/' -e 's/^  threads: 0 .*$/  threads: 0\n  device: cuda/' \
    -e 's/^  validation_fraction: 0.1$/  validation_fraction: 0.1\n  train_subset: 20000\n  test_subset: 2000/' \
    "$root/configs/fashion_cnn.yaml" > gpu.yaml
grep -q 'device: cuda' gpu.yaml && grep -q 'epochs: 2' gpu.yaml ||
  { echo "FAIL: configs/fashion_cnn.yaml no longer has the lines this test edits"; exit 1; }
out="$(timeout 600 "$STRATA" run gpu.yaml 2>&1)"
rc=$?
if [ "$rc" = 2 ] && grep -q 'has no GPU to train on' <<<"$out"; then
  echo "skipped: $(grep -m1 'no GPU' <<<"$out")"
  exit 77
fi
[ "$rc" = 0 ] && grep -q '\[device\] forward and backward on GPU' <<<"$out" ||
  { echo "FAIL: the GPU run exited $rc"; tail -5 <<<"$out"; fails=$((fails + 1)); }
sed -e 's/device: cuda/device: cpu/' -e 's|dir: gpu|dir: cpu|' gpu.yaml > cpu.yaml
expect_exit 0 '\[device\] CPU' -- "$STRATA" run cpu.yaml
# Test accuracy of the last epoch on either device: the same training up to float rounding.
"$PYTHON3" - gpu/metrics.jsonl cpu/metrics.jsonl <<'PY' || fails=$((fails + 1))
import json, sys
gpu, cpu = ([json.loads(l) for l in open(p)][-1]["test_accuracy"] for p in sys.argv[1:])
assert gpu > 0.85 and abs(gpu - cpu) < 0.01, (gpu, cpu)
print(f"ok: test accuracy {gpu:.4f} on the GPU, {cpu:.4f} on the CPU")
PY
# A GPU run stopped mid-epoch resumes on the CPU from its checkpoint, and ends as the CPU run.
sed -e 's|dir: gpu|dir: moved|' gpu.yaml > moved.yaml
STRATA_FAULT=stop_at_step=300 expect_exit 75 'exit 75' -- "$STRATA" run moved.yaml
sed -i 's/device: cuda/device: cpu/' moved.yaml
expect_exit 0 '\[resume\].*epoch 2/2 step [0-9]+/' -- "$STRATA" run moved.yaml
"$PYTHON3" - moved/metrics.jsonl cpu/metrics.jsonl <<'PY' || fails=$((fails + 1))
import json, sys
moved, cpu = ([json.loads(l) for l in open(p)][-1]["test_accuracy"] for p in sys.argv[1:])
assert abs(moved - cpu) < 0.01, (moved, cpu)
print(f"ok: resumed on the CPU: test accuracy {moved:.4f} ({cpu:.4f} all on the CPU)")
PY
# Each metrics row says where its epoch ran: the moved run's first epoch on the GPU, its second,
# resumed mid-epoch, on the CPU.
"$PYTHON3" - gpu/metrics.jsonl cpu/metrics.jsonl moved/metrics.jsonl <<'PY' || fails=$((fails + 1))
import json, sys
gpu, cpu, moved = ([json.loads(l)["device"] for l in open(p)] for p in sys.argv[1:])
assert all(d.startswith("GPU ") for d in gpu) and set(cpu) == {"CPU"}, (gpu, cpu)
assert moved == [gpu[0], "CPU"], moved
print(f"ok: metrics rows name the device: {moved}")
PY
finish
