#!/usr/bin/env bash
# A hierarchical transfer on Fashion-MNIST on 2 ranks: a coarse classifier over tops / footwear /
# other, one sub-classifier per super-class started from the coarse trunk and trained in parallel,
# routing that makes one 10-class classifier, and a flat model of the same parameter count beside
# it. With the trunk's learning rate at 0 the sub-classifiers' trunks come out bit-identical to
# the coarse one: they start from it.
STRATA="$1"
source "$(dirname "$0")/lib.sh"
MPIEXEC="$(command -v mpiexec.mpich || command -v mpiexec)"
root="$PWD"
cd "$work"

write() {  # $1: output dir, $2: extra transfer settings
  cat <<YAML
run: {name: e2e_hierarchy, seed: 8, threads: 1}
data: {path: $root/data/fashion_mnist.h5, train_subset: 5000, validation_fraction: 0.2, test_subset: 1000}
model:
  layers:
    - flatten
    - dense: {units: 48, init: glorot, name: trunk}
    - relu
    - dense: {units: 10, init: glorot, name: out}
training: {epochs: 2, local_batch: 32, optimizer: {type: sgd, lr: 0.05, momentum: 0.9}}
stages:
  - transfer:
      hierarchical: {tops: [0, 2, 3, 4, 6], footwear: [5, 7, 9], other: [1, 8]}
      $2
output: {dir: $1, progress_seconds: 100}
YAML
}
write learn 'epochs: 2' > learn.yaml
write still 'lr_groups: [{layers: [trunk], lr_scale: 0}]' > still.yaml
expect_exit 0 '\[hierarchy\] test acc .* hierarchical \([0-9]+ parameters\), .* flat' -- "$MPIEXEC" -n 2 "$STRATA" run learn.yaml
expect_exit 0 '\[hierarchy\] report' -- "$MPIEXEC" -n 2 "$STRATA" run still.yaml

"$PYTHON3" - <<'PY' || fails=$((fails + 1))
import json, h5py, numpy as np
r = json.load(open("learn/hierarchy_report.json"))
assert r["super_classes"] == {"tops": [0, 2, 3, 4, 6], "footwear": [5, 7, 9], "other": [1, 8]}, r
assert [s["super_class"] for s in r["sub_classifiers"]] == ["tops", "footwear", "other"]
# Parameters: coarse (3 outputs) + subs (5, 3 and 2 outputs) against the flat model.
h = 784 * 48 + 48
want = 4 * h + 48 * (3 + 5 + 3 + 2) + (3 + 5 + 3 + 2)
assert r["hierarchical"]["parameters"] == want, (r["hierarchical"], want)
assert abs(r["flat"]["parameters"] - want) / want < 0.01, r["flat"]
for k in ("coarse", "hierarchical", "flat"):
    assert 0.5 < r[k]["test_accuracy"] <= 1, (k, r[k])
assert abs(r["gain_over_flat_points"] - 100 * (r["hierarchical"]["test_accuracy"] - r["flat"]["test_accuracy"])) < 1e-9
# Sub-classifiers start from the coarse trunk: with the trunk still, bit-identical to it.
coarse = h5py.File("still/hierarchy/first/0/weights.h5")
for j, k in ((0, 5), (1, 3), (2, 2)):
    sub = h5py.File(f"still/hierarchy/subs/{j}/weights.h5")
    assert np.array_equal(sub["weights/trunk/weight"][:], coarse["weights/trunk/weight"][:]), j
    assert sub["weights/out/weight"].shape == (k, 48), (j, sub["weights/out/weight"].shape)
flat = h5py.File("still/hierarchy/first/1/weights.h5")
assert flat["weights/trunk/weight"].shape[0] > 48  # widened
print("ok: hierarchy", {k: r[k]["test_accuracy"] for k in ("coarse", "hierarchical", "flat")},
      "parameters", r["hierarchical"]["parameters"], "vs", r["flat"]["parameters"],
      "; sub-classifiers start from the coarse trunk")
PY
bad="$(sed 's/other: \[1, 8\]/other: [1]/' learn.yaml | sed 's/dir: learn/dir: bad/')"
echo "$bad" > bad.yaml
expect_exit 2 'bad.yaml:12:28: transfer.hierarchical: class 8 is in no super-class' -- "$STRATA" run bad.yaml
finish
