#!/usr/bin/env bash
# The whole Fashion-MNIST CNN training (configs/fashion_cnn.yaml: 54 000 training images, 5 epochs,
# batch 64) with run.device: cuda and then with run.device: cpu on all cores, in the same run: wall
# time, training samples/s and test accuracy of each, as a Markdown table. Needs data/ from
# jobs/setup.sh, a CUDA build and a GPU (exits 77 without one).
#
#   tests/bench/run_gpu_fashion_bench.sh [STRATA]     (default build/strata)
set -uo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
strata="${1:-$root/build/strata}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
[ -f "$root/data/fashion_mnist.h5" ] || { echo "run_gpu_fashion_bench.sh: no $root/data/fashion_mnist.h5 (jobs/setup.sh makes it)" >&2; exit 1; }
for device in cuda cpu; do
  sed -e "s|path: \.\./data/|path: $root/data/|" -e "s|dir: runs/fashion_cnn|dir: $work/$device|" \
      -e "s/^  threads: 0 .*$/  threads: 0\n  device: $device/" \
      "$root/configs/fashion_cnn.yaml" > "$work/$device.yaml"
  grep -q "device: $device" "$work/$device.yaml" ||
    { echo "run_gpu_fashion_bench.sh: configs/fashion_cnn.yaml no longer has the lines this edits" >&2; exit 1; }
  start=$(date +%s%N)
  out="$(timeout 900 "$strata" run "$work/$device.yaml" 2>&1)"
  rc=$?
  if [ "$device" = cuda ] && [ "$rc" = 2 ] && grep -q 'has no GPU to train on' <<<"$out"; then
    echo "run_gpu_fashion_bench.sh: $(grep -m1 'no GPU' <<<"$out")" >&2
    exit 77
  fi
  [ "$rc" = 0 ] || { echo "run_gpu_fashion_bench.sh: the $device run exited $rc" >&2; tail -5 <<<"$out" >&2; exit 1; }
  echo $(( $(date +%s%N) - start )) > "$work/$device.wall"
  grep -m1 '^\[device\]' <<<"$out" > "$work/$device.where"
done
/usr/bin/python3 - "$work" <<'PY'
import json, statistics, sys
work = sys.argv[1]
print("configs/fashion_cnn.yaml, 5 epochs; samples/s: median over the epochs of the training pass alone\n")
print("| device | where the passes ran | wall s | training samples/s | test accuracy |")
print("| --- | --- | --- | --- | --- |")
for device in ("cuda", "cpu"):
    rows = [json.loads(l) for l in open(f"{work}/{device}/metrics.jsonl")]
    where = open(f"{work}/{device}.where").read().strip().removeprefix("[device] ")
    wall = int(open(f"{work}/{device}.wall").read()) / 1e9
    rate = statistics.median(r["samples_per_s"] for r in rows)
    print(f"| {device} | {where} | {wall:.1f} | {rate:,.0f} | {rows[-1]['test_accuracy']:.4f} |")
PY
