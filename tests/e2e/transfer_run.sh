#!/usr/bin/env bash
# Transfer learning in one run on 2 ranks: a model trained on Fashion-MNIST classes 0-4 is
# fine-tuned on 20 samples of each of classes 5-9 with its trunk frozen and a fresh head, beside
# the same model trained from scratch on the same samples. The frozen trunk comes out bit-identical,
# the weights carry their input normalisation, strata predict reproduces the reported accuracy,
# and weights of another architecture or an artifact no stage makes are refused by name.
STRATA="$1"
source "$(dirname "$0")/lib.sh"
MPIEXEC="$(command -v mpiexec.mpich || command -v mpiexec)"
root="$PWD"
cd "$work"

cat > few.yaml <<YAML
run: {name: e2e_transfer, seed: 4, threads: 1}
data: {path: $root/data/fashion_mnist.h5, train_subset: 6000, validation_fraction: 0.2, test_subset: 1000, classes: [0, 1, 2, 3, 4]}
model:
  layers:
    - flatten
    - dense: {units: 64, init: glorot, name: trunk}
    - relu
    - dense: {units: 5, init: glorot, name: out}
training:
  epochs: 2
  local_batch: 32
  optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
stages:
  - train
  - transfer:
      pretrained: train.model
      classes: [5, 6, 7, 8, 9]
      samples_per_class: 20
      freeze: [trunk]
      epochs: 15
      compare_scratch: true
output: {dir: few, progress_seconds: 100}
YAML
expect_exit 0 '\[transfer\] test acc .* fine-tuned, .* from scratch' -- "$MPIEXEC" -n 2 "$STRATA" run few.yaml
expect_gpu_training few

"$PYTHON3" - <<'PY' || fails=$((fails + 1))
import json, h5py, numpy as np
r = json.load(open("few/transfer_report.json"))
assert r["classes"] == [5, 6, 7, 8, 9] and r["samples_per_class"] == 20, r
assert r["training_samples"] == 100, r["training_samples"]
assert r["frozen"] == ["trunk"] and r["fresh"] == ["out"], r
for k in ("fine_tuned", "scratch"):
    assert r[k]["epoch"] == 15 and 0.2 < r[k]["test_accuracy"] <= 1, r[k]
assert abs(r["gain_over_scratch_points"] - 100 * (r["fine_tuned"]["test_accuracy"] - r["scratch"]["test_accuracy"])) < 1e-9
pre = h5py.File("few/members/0/weights.h5")  # 2 ranks: the train stage has 2 members
tuned = h5py.File("few/" + r["fine_tuned"]["weights"])
scratch = h5py.File("few/" + r["scratch"]["weights"])
# The frozen trunk is the pretrained one to the bit; the head is new and sized for 5 classes.
for t in ("weight", "bias"):
    assert np.array_equal(pre[f"weights/trunk/{t}"][:], tuned[f"weights/trunk/{t}"][:]), t
    assert not np.array_equal(pre[f"weights/trunk/{t}"][:], scratch[f"weights/trunk/{t}"][:]), t
assert tuned["weights/out/weight"].shape == (5, 64)
assert not np.array_equal(pre["weights/out/weight"][:], tuned["weights/out/weight"][:])
# The weights carry the normalisation they were trained with, and the transfer used it.
assert r["normalisation"]["from_weights"] is True
assert abs(pre.attrs["input_mean"] - r["normalisation"]["mean"]) < 1e-7
assert tuned.attrs["input_mean"] == pre.attrs["input_mean"] and tuned.attrs["input_stddev"] == pre.attrs["input_stddev"]
a = json.load(open("few/artifacts.json"))
assert a["transfer.model"]["weights"] == "transfer/0/weights.h5", a["transfer.model"]
print("ok: few-sample transfer:", {k: r[k]["test_accuracy"] for k in ("fine_tuned", "scratch")},
      "frozen trunk bit-identical, fresh 5-class head, normalisation from the weights")
PY

# strata predict on the fine-tuned weights, with the config the stage wrote, reproduces the report.
want="$("$PYTHON3" -c 'import json; print(json.load(open("few/transfer_report.json"))["fine_tuned"]["test_accuracy"])')"
expect_exit 0 "test accuracy $want " -- "$STRATA" predict few/transfer/0/config.yaml few/transfer/0/weights.h5

# A transfer stage with its own parallel block: the same fine-tuning with the model split over
# M = 2 shards (each shard loads its slice of the pretrained tensors); the frozen trunk comes out
# whole and bit-identical.
sed -e 's/name: trunk}/name: trunk, split: column}/' -e 's/name: out}/name: out, split: row}/' \
    -e 's/      compare_scratch: true/      compare_scratch: true\n      parallel: {model: 2}/' \
    -e 's/dir: few/dir: split/' few.yaml > split.yaml
expect_exit 0 '\[run\] stage 2/2: transfer on G = 1 x D = 1 x M = 2' -- "$MPIEXEC" -n 2 "$STRATA" run split.yaml
"$PYTHON3" - <<'PY' || fails=$((fails + 1))
import h5py, numpy as np
pre = h5py.File("split/members/0/weights.h5")
tuned = h5py.File("split/transfer/0/weights.h5")
for t in ("weight", "bias"):
    assert np.array_equal(pre[f"weights/trunk/{t}"][:], tuned[f"weights/trunk/{t}"][:]), t
assert tuned["weights/out/weight"].shape == (5, 64)
print("ok: the transfer on M = 2 loads each shard's slice; its frozen trunk is the pretrained one")
PY

# A checkpoint serves as pretrained weights too, with the normalisation saved in it.
ckpt="$(ls few/checkpoints/stage0/member0/ckpt-*.h5 | tail -1)"
sed -e "s|pretrained: train.model|pretrained: $ckpt|" -e 's/dir: few/dir: fromckpt/' -e 's/  - train$//' few.yaml > fromckpt.yaml
expect_exit 0 'from a file \(few/checkpoints/stage0/member0/ckpt-[0-9]+\.h5\).*normalisation from the weights' -- "$STRATA" run fromckpt.yaml

# Weights of another architecture: every mismatching tensor is named.
sed -e 's/units: 64, init: glorot, name: trunk/units: 32, init: glorot, name: trunk/' \
    -e 's|pretrained: train.model|pretrained: few/members/0/weights.h5|' -e 's/dir: few/dir: other/' \
    -e 's/  - train$//' few.yaml > other.yaml
expect_exit 3 'other shape: trunk/weight \(file \[64,784\], model \[32,784\]\), trunk/bias \(file \[64\], model \[32\]\)' -- "$STRATA" run other.yaml
sed -e 's/name: trunk/name: body/' -e 's|pretrained: train.model|pretrained: few/members/0/weights.h5|' \
    -e 's/dir: few/dir: renamed/' -e 's/  - train$//' -e 's/freeze: \[trunk\]/freeze: [body]/' few.yaml > renamed.yaml
expect_exit 3 'missing from the file: body/weight, body/bias; in the file but not in the model: trunk/bias, trunk/weight' -- "$STRATA" run renamed.yaml
# An artifact that no earlier stage makes: a config error at its line, before anything runs.
sed -e 's/pretrained: train.model/pretrained: hpo.best/' -e 's/dir: few/dir: nohpo/' few.yaml > nohpo.yaml
expect_exit 2 'nohpo.yaml:16:19: stages: transfer: no earlier stage publishes .hpo.best. \(published before this stage: train.model\)' -- "$STRATA" run nohpo.yaml
[ ! -e nohpo ] || { echo "FAIL: the refused run left nohpo/"; fails=$((fails + 1)); }
# Mistakes in a transfer stage are refused before the train stage before it runs (by plan too),
# not after it has trained: a layer name, a class label, a missing pretrained file.
sed -e 's/freeze: \[trunk\]/freeze: [trunc]/' -e 's/dir: few/dir: badname/' few.yaml > badname.yaml
expect_exit 2 'badname.yaml:[0-9]+:[0-9]+: stages\[1\].transfer.freeze: the pretrained model has no layer .trunc. \(layers: flatten_0, trunk, relu_2, out\)' -- \
  "$STRATA" plan badname.yaml --ranks 2
sed -e 's/classes: \[5, 6, 7, 8, 9\]/classes: [5, 6, 7, 8, 10]/' -e 's/dir: few/dir: badclass/' few.yaml > badclass.yaml
expect_exit 2 "badclass.yaml:[0-9]+:[0-9]+: stages\\[1\\].transfer.classes: class 10 is not one of the data's 10 classes \\(0 to 9\\)" -- \
  "$MPIEXEC" -n 2 "$STRATA" run badclass.yaml
sed -e 's|pretrained: train.model|pretrained: absent/weights.h5|' -e 's/dir: few/dir: nofile/' few.yaml > nofile.yaml
expect_exit 2 'nofile.yaml:[0-9]+:[0-9]+: stages\[1\].transfer.pretrained: no file .*absent/weights.h5' -- \
  "$MPIEXEC" -n 2 "$STRATA" run nofile.yaml
expect_exit 2 'transfer.freeze: the pretrained model has no layer .trunc.' -- "$MPIEXEC" -n 2 "$STRATA" run badname.yaml
sed -e 's/, classes: \[0, 1, 2, 3, 4\]/, read: shards/' -e 's/units: 5,/units: 10,/' -e 's/dir: few/dir: sharded/' few.yaml > sharded.yaml
expect_exit 2 'sharded.yaml:[0-9]+:[0-9]+: stages\[1\].transfer: a new label set, samples_per_class or a hierarchy selects samples in memory' -- \
  "$STRATA" plan sharded.yaml --ranks 2
for dir in badname badclass nofile; do
  [ ! -e "$dir" ] || { echo "FAIL: the refused run left $dir/ (its train stage ran)"; fails=$((fails + 1)); }
done
# A pretrained file given with --set is relative to the working directory, as data.path is (here
# a subdirectory, not the config's), and an error in it names the override.
mkdir -p sub
expect_exit 2 "^strata: config error: --set stages\\[1\\].transfer.pretrained=elsewhere.h5: stages\\[1\\].transfer.pretrained: no file $(pwd -P)/sub/elsewhere.h5" -- \
  bash -c "cd sub && '$STRATA' plan ../nofile.yaml --ranks 1 --set 'stages[1].transfer.pretrained=elsewhere.h5'"
expect_exit 2 "^strata: config error: --set stages\\[1\\].transfer.classes=\\[5, 10\\]: stages\\[1\\].transfer.classes: class 10 is not one of" -- \
  "$STRATA" plan few.yaml --ranks 1 --set 'stages[1].transfer.classes=[5, 10]'
# A file in the run's own output.dir may come from an earlier stage: it is looked for when the
# stage starts, so plan accepts it.
expect_exit 0 'device: run.device' -- \
  "$STRATA" plan nofile.yaml --ranks 1 --set 'stages[1].transfer.pretrained=nofile/members/0/weights.h5'
finish
