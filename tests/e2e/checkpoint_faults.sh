#!/usr/bin/env bash
# Damaged checkpoints and full disks: each gets a clear message, and either the next older valid
# checkpoint is used (the run then ends exactly as the uninterrupted one) or the run exits 3.
# A full disk is a real one: a small tmpfs (root needed; without it the test fails, saying why).
STRATA="$1"
source "$(dirname "$0")/lib.sh"
cd "$work"
data="$OLDPWD/data/fashion_mnist.h5"
MPIEXEC="$(command -v mpiexec.mpich || command -v mpiexec)"

write_config() {  # $1: output dir, $2: units of the hidden dense layer, $3: M (default 1)
  local model="${3:-1}" split=""
  [ "$model" = 1 ] || split=", split: column"
  cat <<YAML
run: {name: faults, seed: 5, threads: $((model > 1 ? 1 : 2))}
parallel: {model: $model}
data: {source: hdf5, path: $data, train_subset: 4000, test_subset: 1000}
model:
  layers:
    - conv2d: {filters: 8, kernel: 5, init: glorot}
    - relu
    - maxpool2d: {size: 2}
    - flatten
    - dense: {units: $2, init: glorot$split}
    - relu
    - dense: {units: 10, init: glorot}
training:
  epochs: 2
  local_batch: 32
  optimizer: {type: adam, lr: 0.002}
output: {dir: $1, progress_seconds: 100}
checkpoint: {every_steps: 25, keep: 3}
YAML
}
write_config ref 32 > ref.yaml
write_config out 32 > run.yaml
expect_exit 0 'done' -- "$STRATA" run ref.yaml
weights_of() { h5dump -d /weights/dense_4/weight -d /weights/dense_6/bias "$1/weights.h5" 2>&1 | grep -v HDF5; }
weights_of ref > ref.txt
same_as_ref() {
  if diff -q ref.txt <(weights_of out) >/dev/null; then echo "ok: $1: the run ended as the uninterrupted one"
  else echo "FAIL: $1: the final weights differ from the uninterrupted run"; fails=$((fails + 1)); fi
}

# A run stopped at step 150 keeps the checkpoints of steps 100, 125 and 150.
STRATA_FAULT=stop_at_step=150 expect_exit 75 'exit 75' -- "$STRATA" run run.yaml
cp -a out base
ckpts=out/checkpoints/stage0/member0
newest() { ls "$ckpts"/ckpt-*.h5 | tail -1; }
restore() { rm -rf out && cp -a base out; }

# The newest cut in half: reported, and the one before it used.
restore
truncate -s 200000 "$(newest)"
expect_exit 3 "$(basename "$(newest)")  DAMAGED: .*(truncated|damaged)" -- "$STRATA" inspect out
expect_exit 3 'truncated' -- "$STRATA" inspect "$(newest)"
expect_exit 0 'stage 0 member 0: epoch 2/2 step 13, global step 125; written on G 1 x D 1 x M 1, K 1, 2 thread\(s\), global batch 32' -- "$STRATA" inspect "$(ls "$ckpts"/ckpt-*.h5 | tail -2 | head -1)"
expect_exit 0 "skipping a damaged checkpoint: .*$(basename "$(newest)").*(truncated|damaged)" -- "$STRATA" run run.yaml
same_as_ref "truncated newest checkpoint"

# One flipped byte inside a tensor's data: the checksum finds it.
restore
"$PYTHON3" - "$(newest)" <<'PY' || fails=$((fails + 1))
import sys, h5py
path = sys.argv[1]
with h5py.File(path, "r") as f:
    offset = f["optimizer/first_moment/dense_4/weight"].id.get_offset()
with open(path, "r+b") as f:
    f.seek(offset + 1000)
    byte = f.read(1)
    f.seek(offset + 1000)
    f.write(bytes([byte[0] ^ 0x04]))
print("flipped the byte at", offset + 1000)
PY
expect_exit 3 'optimizer/first_moment/dense_4/weight: checksum mismatch' -- "$STRATA" inspect "$(newest)"
expect_exit 0 'skipping a damaged checkpoint: .*optimizer/first_moment/dense_4/weight: checksum mismatch' -- "$STRATA" run run.yaml
same_as_ref "flipped byte in the newest checkpoint"

# The newest deleted: the next older one is the newest.
restore
rm "$(newest)"
expect_exit 0 'resume\] from .*: epoch 2/2 step 13/112' -- "$STRATA" run run.yaml
same_as_ref "deleted newest checkpoint"

# Every checkpoint damaged: exit 3, naming each, and nothing started over.
restore
for f in "$ckpts"/ckpt-*.h5; do truncate -s 1000 "$f"; done
expect_exit 3 'none of the 3 checkpoints is valid; not starting over' -- "$STRATA" run run.yaml

# A checkpoint of another model (hidden layer 48 wide instead of 32): exit 3, naming the tensor.
restore
write_config out 48 > other.yaml
expect_exit 3 'weights/dense_4/weight has shape \[32,1152\] but \[48,1152\] is needed.*another config' -- "$STRATA" run other.yaml

# The final weights cannot be written (disk full): exit 3, no weights.h5, the checkpoints intact.
restore
ln -s /dev/full out/weights.h5.tmp
expect_exit 3 'weights.h5.tmp: .*(disk full|No space left on device)' -- "$STRATA" run run.yaml
[ ! -e out/weights.h5 ] || { echo "FAIL: a weights.h5 was left behind"; fails=$((fails + 1)); }
rm -f out/weights.h5.tmp
expect_exit 0 'resume\] from .*training complete' -- "$STRATA" run run.yaml
same_as_ref "final write on a full disk, then resumed"

# A real full disk during a checkpoint: a 1.2 MB tmpfs holds two checkpoints of 0.48 MB, not three.
disk="$work/disk"
mkdir -p "$disk"
if ! mount -t tmpfs -o size=1200k tmpfs "$disk" 2>mount.err; then
  echo "FAIL: cannot mount a small tmpfs for the full-disk test ($(cat mount.err)); it needs root"
  fails=$((fails + 1))
else
  trap 'umount "$disk" 2>/dev/null; rm -rf "$work"' EXIT
  write_config "$disk/out" 32 > disk.yaml
  expect_exit 3 '/checkpoints/.*ckpt-[0-9]+.h5.tmp: .*(disk full|No space left on device)' -- "$STRATA" run disk.yaml
  if [ -n "$(find "$disk/out" -name '*.tmp')" ]; then echo "FAIL: a temporary file was left on the full disk"; fails=$((fails + 1)); fi
  rm -rf out && cp -a "$disk/out" out && umount "$disk"
  expect_exit 0 'resume\] from .*ckpt-00000002.h5: epoch 1/2 step 50/112' -- "$STRATA" run run.yaml
  same_as_ref "full disk during a checkpoint, resumed elsewhere"
  # The same with the hidden dense layer (most of the bytes) split over M = 2 shards, which write
  # their slices into the file together: every shard learns of the full disk and the job ends
  # with exit 3, no shard hangs.
  mount -t tmpfs -o size=1200k tmpfs "$disk"
  write_config "$disk/out" 32 2 > disk2.yaml
  expect_exit 3 '/checkpoints/.*ckpt-[0-9]+.h5.tmp: .*(disk full|No space left on device)' -- timeout 120 "$MPIEXEC" -n 2 "$STRATA" run disk2.yaml
  if [ -n "$(find "$disk/out" -name '*.tmp')" ]; then echo "FAIL: M = 2: a temporary file was left on the full disk"; fails=$((fails + 1)); fi
  n=$(ls "$disk"/out/checkpoints/stage0/member0/ckpt-*.h5 | wc -l)
  [ "$n" = 2 ] && echo "ok: M = 2 on a full disk: the two checkpoints that fit are kept" ||
    { echo "FAIL: M = 2 on a full disk: $n checkpoints, expected 2"; fails=$((fails + 1)); }
  for f in "$disk"/out/checkpoints/stage0/member0/ckpt-*.h5; do
    expect_exit 0 'written on G 1 x D 1 x M 2' -- "$STRATA" inspect "$f"
  done
  umount "$disk"
fi
finish
