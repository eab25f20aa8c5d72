#!/usr/bin/env bash
# Checkpoint and restart on one decomposition: a training stopped by the signal mid-epoch, killed
# with SIGKILL at many points (including in the middle of a checkpoint write) and resumed, ends
# bit-identical to the same run uninterrupted: weights, optimizer state and every metrics row.
STRATA="$1"
source "$(dirname "$0")/lib.sh"
cd "$work"
data="$OLDPWD/data/fashion_mnist.h5"

# 112 steps per epoch, 2 epochs; dropout, Adam and a cosine schedule: every kind of state.
cat > run.yaml <<YAML
run: {name: ckpt, seed: 5, threads: 2}
data: {source: hdf5, path: $data, train_subset: 4000, test_subset: 1000}
model:
  layers:
    - conv2d: {filters: 8, kernel: 5, init: glorot}
    - relu
    - maxpool2d: {size: 2}
    - flatten
    - dense: {units: 32, init: glorot}
    - dropout: {rate: 0.25}
    - relu
    - dense: {units: 10, init: glorot}
training:
  epochs: 2
  local_batch: 32
  optimizer: {type: adam, lr: 0.002}
  schedule: {type: cosine}
output: {dir: out, progress_seconds: 100}
checkpoint: {every_steps: 25, keep: 3}
YAML
sed 's/dir: out,/dir: ref,/' run.yaml > ref.yaml

expect_exit 0 'done' -- "$STRATA" run ref.yaml
expect_gpu_training ref

# The final weights, every metrics row but the wall-clock ones and every step's row (each step
# once, in order, with the uninterrupted run's loss), for comparison with ref/.
fingerprint() {
  h5dump -d /weights/conv2d_0/weight -d /weights/dense_4/weight -d /weights/dense_7/bias "$1/weights.h5" | grep -v HDF5
  metrics_without_timing "$1"
  cat "$1/steps.jsonl"
}
fingerprint ref > ref.txt
[ -s ref.txt ] || { echo "FAIL: the uninterrupted run left no weights to compare with"; exit 1; }
[ "$(wc -l < ref/steps.jsonl)" = 224 ] || { echo "FAIL: steps.jsonl has not the 224 steps' rows"; fails=$((fails + 1)); }
same_as_ref() {  # $1: what was done
  if diff -q ref.txt <(fingerprint out) >/dev/null; then echo "ok: $1: identical to the uninterrupted run"
  else echo "FAIL: $1: differs from the uninterrupted run"; diff ref.txt <(fingerprint out) | head -5; fails=$((fails + 1)); fi
}

# The README's layout is enough for another tool: h5py and zlib read the newest checkpoint and
# check every dataset's crc32 and the attributes' scalars_crc32 as the README describes them.
"$PYTHON3" - "$(ls ref/checkpoints/stage0/member0/ckpt-*.h5 | tail -1)" <<'PY' || fails=$((fails + 1))
import struct, sys, zlib
import h5py, numpy as np
path = sys.argv[1]
with h5py.File(path, "r") as f:
    assert f.attrs["format"] == "strata-checkpoint" and f.attrs["format_version"] == 1
    scalars, datasets = {}, 0
    def visit(name, obj):
        global datasets
        if isinstance(obj, h5py.Dataset):
            datasets += 1
            assert zlib.crc32(obj[()].astype("<f4").tobytes()) == int(obj.attrs["crc32"]) & 0xffffffff, name
        else:
            scalars.update({f"{name}/{k}": v for k, v in obj.attrs.items()})
    f.visititems(visit)
    scalars.update({k: v for k, v in f.attrs.items() if k not in ("format", "format_version", "scalars_crc32")})
    def text(v):
        if isinstance(v, (bytes, str)):
            return "s:" + (v.decode() if isinstance(v, bytes) else v)
        if isinstance(v, (float, np.floating)):
            return "r:%x" % struct.unpack("<Q", struct.pack("<d", float(v)))[0]
        return "i:%d" % int(v)
    lines = "".join(f"{k}={text(scalars[k])}\n" for k in sorted(scalars))
    assert zlib.crc32(lines.encode()) == int(f.attrs["scalars_crc32"]) & 0xffffffff, "scalars_crc32"
    assert f["weights/dense_7/weight"].shape == (10, 32) and f["trainer"].attrs["epoch"] == 3
print(f"ok: h5py reads {path}: {datasets} datasets and {len(scalars)} attributes, every checksum as documented")
PY

# The stop signal mid-epoch: checkpoint, exit 75, and a resume that says from where.
rm -rf out
STRATA_FAULT=stop_at_step=150 expect_exit 75 'stopped by a signal at epoch 2 step 38.*exit 75' -- "$STRATA" run run.yaml
expect_exit 0 'resume\] from .*ckpt-[0-9]+.h5: epoch 2/2 step 38/112 \(global step 150\)' -- "$STRATA" run run.yaml
same_as_ref "signal at step 150"
expect_exit 0 'every stage is done' -- "$STRATA" run run.yaml
same_as_ref "a rerun of a finished run"

# SIGKILL after a step, and in the middle of the n-th checkpoint write; each run resumed once.
for fault in kill_at_step=1 kill_at_step=25 kill_at_step=26 kill_at_step=112 kill_at_step=113 \
             kill_at_step=224 kill_in_write=1 kill_in_write=3 kill_in_write=5; do
  rm -rf out
  # (A subshell, so that the shell's "Killed" notice goes nowhere.)
  (STRATA_FAULT=$fault timeout 120 "$STRATA" run run.yaml > kill.log 2>&1) 2>/dev/null
  rc=$?
  [ "$rc" = 137 ] || { echo "FAIL: $fault: exit $rc, expected 137 (SIGKILL)"; tail -3 kill.log; fails=$((fails + 1)); }
  # No half-written file ever carries a final name.
  if [ -n "$(find out -name 'ckpt-*.h5' -size -1k)" ]; then echo "FAIL: $fault: an empty checkpoint file"; fails=$((fails + 1)); fi
  timeout 120 "$STRATA" run run.yaml > resume.log 2>&1 || { echo "FAIL: $fault: the resume failed"; tail -3 resume.log; fails=$((fails + 1)); }
  same_as_ref "$fault, resumed ($(grep -o 'resume\] from [^:]*' resume.log | sed 's|.*/||' || echo 'from the start'))"
done

# Several interruptions of one run in a row, across both epochs.
rm -rf out
for fault in kill_at_step=30 stop_at_step=100 kill_in_write=2 kill_at_step=200; do
  (STRATA_FAULT=$fault timeout 120 "$STRATA" run run.yaml > /dev/null 2>&1) 2>/dev/null
done
expect_exit 0 'done' -- "$STRATA" run run.yaml
same_as_ref "four interruptions in a row"
[ "$(wc -l < out/metrics.jsonl)" = 2 ] || { echo "FAIL: metrics.jsonl has $(wc -l < out/metrics.jsonl) rows"; fails=$((fails + 1)); }

# Another thread count is another decomposition: the state loads and the run finishes, close to
# the uninterrupted one but not to the bit (the workers sum gradients in another order).
rm -rf out
STRATA_FAULT=stop_at_step=150 expect_exit 75 'exit 75' -- "$STRATA" run run.yaml
# (A training on a GPU runs one worker thread on the host.)
written_threads=$([ -n "${STRATA_E2E_EXPECT_GPU:-}" ] && echo 1 || echo 2)
expect_exit 0 "written on G 1 x D 1 x M 1 with $written_threads thread\\(s\\)" -- "$STRATA" run run.yaml --threads 1
"$PYTHON3" - ref/metrics.jsonl out/metrics.jsonl <<'PY' || fails=$((fails + 1))
import json, sys
a, b = ([json.loads(l) for l in open(p)][-1]["test_accuracy"] for p in sys.argv[1:])
assert abs(a - b) <= 0.02, f"resumed on 1 thread: test accuracy {b} against {a}"
print(f"ok: resumed on 1 thread instead of 2: test accuracy {b} against {a}")
PY

# every_seconds: a checkpoint at the first step boundary after each interval.
rm -rf out
sed 's/every_steps: 25, keep: 3/every_seconds: 0.0001, keep: 1000/' run.yaml > seconds.yaml
expect_exit 0 'done' -- "$STRATA" run seconds.yaml
n=$(ls out/checkpoints/stage0/member0 | wc -l)
[ "$n" -gt 100 ] && echo "ok: every_seconds wrote $n checkpoints in 224 steps" ||
  { echo "FAIL: every_seconds wrote $n checkpoints"; fails=$((fails + 1)); }

# Without checkpoints to resume from, a directory with results is not silently started over.
rm -rf out/checkpoints
expect_exit 2 'holds the results of a run but no checkpoints.*--fresh' -- "$STRATA" run run.yaml
# A directory where a run failed before its first step (only plan.txt) does not block a rerun.
rm -rf out && mkdir out && echo plan > out/plan.txt
expect_exit 0 'done' -- "$STRATA" run run.yaml
finish
