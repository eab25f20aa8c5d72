#!/usr/bin/env bash
# A run resumes on another decomposition. Member groups: 2 groups of D=2 stopped and resumed as 1
# group (it trains both members in turn), and 1 group resumed as 2: each member ends bit-identical
# to the uninterrupted run, as it trains on the same D=2 both times. Model parallelism: D=2 x M=2
# on 4 ranks stopped mid-epoch and resumed on 2 ranks (D=1 x M=2, K=2) and on 1 rank (K=2): the
# global batch stays 64, and the test accuracy stays within the tolerance that the decomposition
# itself shows (an uninterrupted 1-rank run against the 4-rank one). And M=2 killed in the middle
# of a checkpoint that its shards write together, resumed bit-identical.
STRATA="$1"
source "$(dirname "$0")/lib.sh"
MPIEXEC="$(command -v mpiexec.mpich || command -v mpiexec)"
data="$PWD/data/fashion_mnist.h5"
cd "$work"
tolerance=0.02

# ---- member groups
cat > members.yaml <<YAML
run: {name: members, seed: 8, threads: 1}
data: {source: hdf5, path: $data, train_subset: 3000, test_subset: 500}
model:
  layers: [flatten, {dense: {units: 64, init: glorot}}, relu, {dense: {units: 10, init: glorot}}]
training: {epochs: 2, local_batch: 32, optimizer: {type: sgd, lr: 0.05, momentum: 0.9}}
parallel: {data: 2, max_global_batch: 64}
output: {dir: out, progress_seconds: 100}
checkpoint: {every_steps: 10}
YAML
sed 's/dir: out,/dir: ref,/' members.yaml > members_ref.yaml
member_weights() { h5dump -d /weights/dense_1/weight "$1/weights.h5" 2>&1 | grep -v HDF5 | md5sum | cut -c1-32; }

expect_exit 0 'done' -- "$MPIEXEC" -n 4 "$STRATA" run members_ref.yaml
STRATA_FAULT=stop_at_step=60 expect_exit 75 'exit 75' -- "$MPIEXEC" -n 4 "$STRATA" run members.yaml
expect_exit 0 'resuming in out: stage 1/1' -- "$MPIEXEC" -n 2 "$STRATA" run members.yaml
for m in 0 1; do
  if [ "$(member_weights out/members/$m)" = "$(member_weights ref/members/$m)" ] &&
     diff -q <(metrics_without_timing ref/members/$m) <(metrics_without_timing out/members/$m) >/dev/null; then
    echo "ok: member $m, stopped on 2 groups and resumed on 1, is bit-identical"
  else echo "FAIL: member $m differs after 2 groups were resumed as 1"; fails=$((fails + 1)); fi
done

rm -rf out ref
expect_exit 0 'done' -- "$MPIEXEC" -n 2 "$STRATA" run members_ref.yaml
STRATA_FAULT=stop_at_step=60 expect_exit 75 'exit 75' -- "$MPIEXEC" -n 2 "$STRATA" run members.yaml
expect_exit 0 'idle in this stage: the run has 1 member' -- "$MPIEXEC" -n 4 "$STRATA" run members.yaml
if [ "$(member_weights out)" = "$(member_weights ref)" ]; then echo "ok: 1 group resumed as 2 is bit-identical"
else echo "FAIL: 1 group resumed as 2 differs"; fails=$((fails + 1)); fi
# SIGKILL under mpiexec (D=2) after step 45, resumed from the newest checkpoint whose background
# write had finished (the epoch end at step 42, or step 40 or 30): bit-identical.
rm -rf out
(STRATA_FAULT=kill_at_step=45 "$MPIEXEC" -n 2 "$STRATA" run members.yaml > killed.log 2>&1) 2>/dev/null
expect_exit 0 'resume\] from .*\(global step (30|40|42)\)' -- "$MPIEXEC" -n 2 "$STRATA" run members.yaml
if [ "$(member_weights out)" = "$(member_weights ref)" ] &&
   diff -q <(metrics_without_timing ref) <(metrics_without_timing out) >/dev/null; then
  echo "ok: D=2 killed with SIGKILL under mpiexec and resumed is bit-identical"
else echo "FAIL: D=2 killed and resumed differs"; fails=$((fails + 1)); fi

# ---- model parallelism
write_split() {  # $1: output dir, $2: M
  cat <<YAML
run: {name: split, seed: 4, threads: 1}
data: {source: hdf5, path: $data, train_subset: 6000, test_subset: 2000}
model:
  layers:
    - conv2d: {filters: 16, kernel: 5, init: glorot, split: column}
    - relu
    - maxpool2d: {size: 2}
    - flatten
    - dense: {units: 64, init: glorot, split: column}
    - relu
    - dense: {units: 32, init: glorot, split: row}
    - relu
    - dense: {units: 10, init: glorot}
training: {epochs: 2, local_batch: 32, optimizer: {type: adam, lr: 0.002}}
parallel: {model: $2, max_global_batch: 64, accumulate: auto}
output: {dir: $1, progress_seconds: 100}
checkpoint: {every_steps: 20}
YAML
}
accuracy() { "$PYTHON3" -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1])][-1]["test_accuracy"])' "$1/metrics.jsonl"; }
write_split ref4 2 > ref4.yaml
write_split ref1 1 > ref1.yaml
expect_exit 0 'global batch 64 \(1 micro-batch\(es\) x 2 replicas x 32\)' -- "$MPIEXEC" -n 4 "$STRATA" run ref4.yaml
expect_exit 0 'global batch 64 \(2 micro-batch\(es\) x 1 replicas x 32\)' -- "$STRATA" run ref1.yaml
a4=$(accuracy ref4); a1=$(accuracy ref1)
echo "uninterrupted: D=2 x M=2 test accuracy $a4, 1 rank $a1"
for ranks in 2 1; do
  rm -rf out
  write_split out 2 > split4.yaml
  write_split out "$ranks" > resumed.yaml
  # The ranks agree on the signal one step later (a non-blocking vote): step 151 of 168.
  STRATA_FAULT=stop_at_step=150 expect_exit 75 'stopped by a signal at epoch 2 step 67' -- "$MPIEXEC" -n 4 "$STRATA" run split4.yaml
  expect_exit 0 "resume\] from .*epoch 2/2 step 67/84 \(global step 151\), written on G 1 x D 2 x M 2" -- "$MPIEXEC" -n "$ranks" "$STRATA" run resumed.yaml
  a=$(accuracy out)
  if "$PYTHON3" -c "import sys; a, b, c, t = map(float, sys.argv[1:]); sys.exit(not (abs(a - b) <= t and abs(c - b) <= t))" "$a" "$a4" "$a1" "$tolerance"; then
    echo "ok: D=2 x M=2 resumed on $ranks rank(s): test accuracy $a, uninterrupted $a4 (1 rank: $a1), within $tolerance"
  else echo "FAIL: resumed on $ranks rank(s): test accuracy $a against $a4 (1 rank: $a1), tolerance $tolerance"; fails=$((fails + 1)); fi
done

# M=2 on 2 ranks, each shard writing its own slices of every checkpoint, killed with SIGKILL
# halfway through the third write (step 60): the half-written file never takes a checkpoint's
# name; with the second one damaged, the resume on the same layout starts from step 20 and ends
# bit-identical.
split_weights() { h5dump -g /weights "$1/weights.h5" 2>&1 | grep -v HDF5 | md5sum | cut -c1-32; }
rm -rf out
write_split ref2 2 > ref2.yaml
write_split out 2 > split2.yaml
expect_exit 0 'done' -- "$MPIEXEC" -n 2 "$STRATA" run ref2.yaml
(STRATA_FAULT=kill_in_write=3 timeout 120 "$MPIEXEC" -n 2 "$STRATA" run split2.yaml > killed.log 2>&1) 2>/dev/null
ckpts=out/checkpoints/stage0/member0
if [ -e "$ckpts/ckpt-00000003.h5.tmp" ] && [ ! -e "$ckpts/ckpt-00000003.h5" ]; then
  echo "ok: M=2 killed in its third checkpoint write: ckpt-00000003.h5.tmp only"
else echo "FAIL: M=2 killed in a write left: $(ls "$ckpts" | tr '\n' ' ')"; fails=$((fails + 1)); fi
# Killed at step 39, between two checkpoints: the one of step 20 was named once the step vote
# showed both shards done with it (not only at the next checkpoint), so the resume starts there.
rm -rf between && sed 's/dir: out,/dir: between,/' split2.yaml > between.yaml
(STRATA_FAULT=kill_at_step=39 timeout 120 "$MPIEXEC" -n 2 "$STRATA" run between.yaml > /dev/null 2>&1) 2>/dev/null
expect_exit 0 'resume\] from .*ckpt-00000001.h5: epoch 1/2 step 20/84 \(global step 20\)' -- "$MPIEXEC" -n 2 "$STRATA" run between.yaml
# Another model (the split layer wider) in the same directory: refused as another config on every
# shard, not skipped as damage, and nothing renamed.
sed 's/units: 64/units: 96/' split2.yaml > other2.yaml
expect_exit 3 'ckpt-00000002.h5: dataset /.*dense_4/.* has shape \[64\], this model.s \[96\] \(a checkpoint of another config\?' -- "$MPIEXEC" -n 2 "$STRATA" run other2.yaml
if ls "$ckpts" | grep -q damaged; then echo "FAIL: another model's run renamed checkpoints aside"; fails=$((fails + 1)); fi
# The newest complete one damaged where only the last shard reads: the last byte of the split
# layer's data. Each shard reads its own slices, and the checksum combined from theirs finds it.
"$PYTHON3" - "$ckpts/ckpt-00000002.h5" <<'PY' || fails=$((fails + 1))
import sys, h5py
with h5py.File(sys.argv[1], "r") as f:
    d = f["weights/dense_4/weight"]
    at = d.id.get_offset() + d.id.get_storage_size() - 1
with open(sys.argv[1], "r+b") as f:
    f.seek(at)
    b = f.read(1)
    f.seek(at)
    f.write(bytes([b[0] ^ 0x40]))
PY
timeout -k 10 120 "$MPIEXEC" -n 2 "$STRATA" run split2.yaml > resumed2.log 2>&1 ||
  { echo "FAIL: M=2 resume exited $?"; tail -3 resumed2.log; fails=$((fails + 1)); }
for pattern in 'skipping a damaged checkpoint: .*ckpt-00000002.h5: dataset /weights/dense_4/weight: checksum mismatch' \
               'resume\] from .*ckpt-00000001.h5: epoch 1/2 step 20/84 \(global step 20\), written on G 1 x D 1 x M 2'; do
  if grep -qE -- "$pattern" resumed2.log; then echo "ok: M=2 resume: $(grep -Eo -m1 -- "$pattern" resumed2.log)"
  else echo "FAIL: M=2 resume lacks /$pattern/"; tail -3 resumed2.log; fails=$((fails + 1)); fi
done
[ -e "$ckpts/ckpt-00000002.h5.damaged" ] && echo "ok: the damaged checkpoint was renamed aside" ||
  { echo "FAIL: no ckpt-00000002.h5.damaged"; fails=$((fails + 1)); }
if [ "$(split_weights out)" = "$(split_weights ref2)" ] &&
   diff -q <(metrics_without_timing ref2) <(metrics_without_timing out) >/dev/null; then
  echo "ok: M=2 killed in a checkpoint write and resumed past a damaged one is bit-identical"
else echo "FAIL: M=2 killed in a checkpoint write and resumed differs"; fails=$((fails + 1)); fi
finish
