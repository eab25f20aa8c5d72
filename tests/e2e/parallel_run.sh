#!/usr/bin/env bash
# `mpiexec -n 4 strata run` on configs/parallel.yaml (a data subset): 2 member groups of D=2 each write
# their own metrics and weights; an impossible plan stops every rank with exit 2, and an error on one
# rank alone stops the job with exit 3, instead of hanging; so does one while a training is built,
# on every rank alike (a train stage, an ensemble's queue).
STRATA="$1"
source "$(dirname "$0")/lib.sh"
MPIEXEC="$(command -v mpiexec.mpich || command -v mpiexec)"
root="$PWD"
cd "$work"
sed -e "s|path: \.\./data/|path: $root/data/|" -e "s|dir: runs/parallel|dir: $work/out|" \
    -e 's/validation_fraction: 0.1/validation_fraction: 0.1\n  train_subset: 2560\n  test_subset: 500/' \
    -e 's/epochs: 2/epochs: 1/' "$root/configs/parallel.yaml" > parallel.yaml

expect_exit 0 '4 ranks = G 2 member groups x D 2 data replicas x M 1 model shards; global batch 64' -- \
  "$MPIEXEC" -n 4 "$STRATA" run parallel.yaml
for g in 0 1; do
  [ "$(wc -l < out/members/$g/metrics.jsonl)" = 1 ] || { echo "FAIL: members/$g/metrics.jsonl"; fails=$((fails + 1)); }
  [ -f out/members/$g/weights.h5 ] || { echo "FAIL: members/$g/weights.h5 missing"; fails=$((fails + 1)); }
  # The stage publishes each member's weights for later stages (artifacts.json).
  "$PYTHON3" -c 'import json,sys; m=json.load(open("out/artifacts.json"))["train.model"]["members"][int(sys.argv[1])]; assert m["weights"] == f"members/{sys.argv[1]}/weights.h5", m' "$g" ||
    { echo "FAIL: artifacts.json lacks member $g's weights"; fails=$((fails + 1)); }
done
grep -q 'group 1: ranks 2-3' out/plan.txt || { echo "FAIL: plan.txt lacks the group layout"; fails=$((fails + 1)); }
# Each member has its own seed, so the two models differ.
if cmp -s <(h5dump -d /weights/dense_9/weight out/members/0/weights.h5 | tail -n +3) \
          <(h5dump -d /weights/dense_9/weight out/members/1/weights.h5 | tail -n +3); then
  echo "FAIL: the two member groups trained identical models"; fails=$((fails + 1))
else echo "ok: the member groups trained different models"; fi

# The one-line change to D=2 x M=2: one model, split layers sharded over 2 ranks, weights saved whole,
# so that a single rank without any split reproduces the test accuracy from them.
sed -e 's/  model: 1 .*/  model: 2/' -e "s|$work/out|$work/out_mp|" parallel.yaml > model_parallel.yaml
expect_exit 0 '4 ranks = G 1 member groups x D 2 data replicas x M 2 model shards; global batch 64' -- \
  "$MPIEXEC" -n 4 "$STRATA" run model_parallel.yaml
h5ls -r out_mp/weights.h5 | grep -q '/weights/dense_7/weight  *Dataset {128, 512}' \
  || { echo "FAIL: the column-split dense weight was not saved whole"; h5ls -r out_mp/weights.h5; fails=$((fails + 1)); }
# The sharded sums round differently from the whole ones, so a borderline sample may flip: compare
# the loss closely and the accuracy to within a sample or two.
predicted="$("$STRATA" predict model_parallel.yaml out_mp/weights.h5)"
"$PYTHON3" - out_mp/metrics.jsonl "$predicted" <<'PY' || fails=$((fails + 1))
import json, re, sys
last = [json.loads(l) for l in open(sys.argv[1])][-1]
acc, loss = map(float, re.search(r"test accuracy ([0-9.]+) loss ([0-9.]+)", sys.argv[2]).groups())
assert abs(loss - last["test_loss"]) < 1e-3 * last["test_loss"], f"predict loss {loss} vs trained {last['test_loss']}"
assert abs(acc - last["test_accuracy"]) <= 0.005, f"predict accuracy {acc} vs trained {last['test_accuracy']}"
print(f"ok: one unsplit rank reproduces the M=2 model: loss {loss} vs {last['test_loss']:.4f}, accuracy {acc} vs {last['test_accuracy']}")
PY

# With no GPU on any shard (run.device auto on a machine without one) or with run.device cpu, a
# split model trains on the CPU without a warning about GPUs. (Where the node has a GPU, auto may
# rightly warn that the two shards would share it: only cpu is checked there.)
devices="auto cpu"
if nvidia-smi -L 2>/dev/null | grep -q '^GPU'; then devices="cpu"; fi
for device in $devices; do
  out="$(timeout 120 "$MPIEXEC" -n 2 "$STRATA" run model_parallel.yaml --fresh \
    --set parallel.data=1 --set run.device=$device --set training.epochs=1 \
    --set data.train_subset=640 --set "output.dir=$work/out_device_$device" 2>&1)" ||
    { echo "FAIL: the M=2 run with run.device $device failed"; echo "$out" | tail -3; fails=$((fails + 1)); }
  if grep -q 'warning: run.device' <<<"$out"; then
    echo "FAIL: run.device $device warned: $(grep -m1 'warning: run.device' <<<"$out")"; fails=$((fails + 1))
  else echo "ok: run.device $device: the split model trains on the CPU without a GPU warning"; fi
done

# An error on one rank alone (STRATA_FAULT=fail_at_step: a DataError on the last rank, as a full
# disk on its node would raise) ends the job with that rank's message instead of hanging it: the
# rank leaves its replicas' shared-memory window to MPI, whose free would wait for the other rank.
expect_seconds=60 expect_exit 3 'rank 1: data error: injected fault \(STRATA_FAULT=fail_at_step=20\)' -- \
  env STRATA_FAULT=fail_at_step=20 "$MPIEXEC" -n 2 "$STRATA" run parallel.yaml --fresh \
  --set "output.dir=$work/out_fail"
# The same while the training is built (STRATA_FAULT=fail_in_build, on rank 1 alone): both ranks
# stop at once with its message.
expect_seconds=60 expect_exit 1 'rank [01]: error: rank 1 of the member group: injected fault \(STRATA_FAULT=fail_in_build=1\)' -- \
  env STRATA_FAULT=fail_in_build=1 "$MPIEXEC" -n 2 "$STRATA" run parallel.yaml --fresh \
  --set "output.dir=$work/out_build_fail"
# An ensemble's queue of trainings on one D=2 group likewise, failing in the build or before it
# (fail_before_build: a member's data prepared): each member fails on both ranks with rank 1's
# message, and the stage, with no member left, ends the job (exit 3).
cat > ensemble_d2.yaml <<YAML
run: {name: ensemble_d2, seed: 3, threads: 1}
data: {source: synthetic, synthetic: {train: 256, test: 64, classes: 4, channels: 1, height: 8, width: 8}}
model: {layers: [flatten, {dense: {units: 8}}, relu, {dense: {units: 4}}]}
training: {epochs: 1, local_batch: 16, optimizer: {type: sgd, lr: 0.1}}
parallel: {data: 2, max_global_batch: 32}
stages: [{ensemble: {seeds: 3}}]
output: {dir: $work/ensemble_d2}
YAML
for fault in fail_in_build fail_before_build; do
  expect_seconds=60 expect_exit 3 'ensemble: every one of its 3 members failed' -- \
    env STRATA_FAULT=$fault=1 "$MPIEXEC" -n 2 "$STRATA" run ensemble_d2.yaml --fresh
  [ "$(grep -c "rank 1 of the member group: injected fault (STRATA_FAULT=$fault=1)" "$work/ensemble_d2/ensemble/trials.csv")" = 3 ] ||
    { echo "FAIL: $fault: the ensemble's trials.csv lacks rank 1's message for each member"; fails=$((fails + 1)); }
done

sed 's/  model: 1 .*/  model: 2/' parallel.yaml > bad.yaml
expect_exit 2 'bad.yaml:[0-9]+:[0-9]+: parallel.model: 3 ranks cannot be split into model groups of 2 shards' -- \
  "$MPIEXEC" -n 3 "$STRATA" run bad.yaml
finish
