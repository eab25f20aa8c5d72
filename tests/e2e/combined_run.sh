#!/usr/bin/env bash
# The combined workflow in one run on 4 ranks: a search flows into an ensemble of its best configs
# (every member trains on a member group; ensemble_report.json gives each member's and each
# combiner's accuracy; strata predict on the ensemble reproduces it) and into a few-sample transfer
# of its best model. Killed with SIGKILL mid-ensemble and rerun on 2 ranks (one-rank groups, so
# each training's decomposition is unchanged), it resumes and writes the same ensemble and
# transfer reports. Seeds, bagging and feature subsets each make their members.
STRATA="$1"
source "$(dirname "$0")/lib.sh"
MPIEXEC="$(command -v mpiexec.mpich || command -v mpiexec)"
root="$PWD"
cd "$work"

cat > pipeline.yaml <<YAML
run: {name: e2e_ensemble, seed: 5, threads: 1}
data: {path: $root/data/fashion_mnist.h5, train_subset: 3000, validation_fraction: 0.3, test_subset: 600}
model:
  layers:
    - flatten
    - dense: {units: \$units, init: glorot}
    - relu
    - dense: {units: 10, init: glorot}
training:
  epochs: 1
  local_batch: 32
  optimizer: {type: sgd, lr: \$lr, momentum: 0.9}
checkpoint: {every_steps: 5}
stages:
  - hpo:
      algorithm: genetic
      population: 4
      generations: 2
      keep_top: 3
      space:
        lr: {log_uniform: [0.01, 0.2]}
        units: {int: [16, 64]}
  - ensemble:
      from: hpo.top_k
      epochs: 2
  - transfer:
      pretrained: hpo.best
      classes: [0, 1, 2]
      samples_per_class: 20
      epochs: 3
      compare_scratch: true
output: {dir: out, progress_seconds: 100}
YAML
sed 's/dir: out/dir: ref/' pipeline.yaml > ref.yaml
expect_exit 0 '\[transfer\] test acc .* fine-tuned' -- "$MPIEXEC" -n 4 "$STRATA" run ref.yaml
expect_gpu_training ref

"$PYTHON3" - ref <<'PY' || fails=$((fails + 1))
import json, sys
d = sys.argv[1]
r = json.load(open(f"{d}/ensemble_report.json"))
top = json.load(open(f"{d}/hpo_summary.json"))["top"]
assert len(top) == 3 and len(r["members"]) == 3, (len(top), len(r["members"]))
for m, t in zip(r["members"], top):
    assert m["status"] == "ok" and f"trial {t['trial']}" in m["source"], (m, t)
    assert 0.5 < m["test_accuracy"] <= 1 and 0.5 < m["val_accuracy"] <= 1, m
best = max(m["test_accuracy"] for m in r["members"])
assert r["best_member"]["test_accuracy"] == best
assert sorted(r["combiners"]) == ["mean", "vote", "weighted"], r["combiners"]
for name, c in r["combiners"].items():
    assert abs(c["gain_over_best_member_points"] - 100 * (c["test_accuracy"] - best)) < 1e-9
assert abs(sum(m["weight"] for m in r["members"]) - 1) < 1e-12
a = json.load(open(f"{d}/artifacts.json"))
assert a["ensemble.members"]["report"] == "ensemble_report.json"
assert [m["weights"] for m in a["ensemble.members"]["members"]] == [f"ensemble/{i}/weights.h5" for i in range(3)]
for i in range(3):
    rows = [json.loads(l) for l in open(f"{d}/ensemble/{i}/metrics.jsonl")]
    assert [row["epoch"] for row in rows] == [1, 2], rows
t = json.load(open(f"{d}/transfer_report.json"))
assert t["pretrained"]["weights"].endswith("best_weights.h5") and t["training_samples"] == 60, t
assert t["fine_tuned"]["epoch"] == 3 and t["scratch"]["epoch"] == 3
assert a["transfer.model"]["weights"] == "transfer/0/weights.h5"
print("ok: 3 members from hpo.top_k, each combiner's accuracy and gain, artifacts and curves; transfer from hpo.best")
PY

# strata predict on the ensemble gives the report's accuracies, to the last digit.
"$STRATA" predict ref.yaml ref > predict.txt 2>&1 || { echo "FAIL: predict on the ensemble"; cat predict.txt; fails=$((fails + 1)); }
"$PYTHON3" - ref/ensemble_report.json predict.txt <<'PY' || fails=$((fails + 1))
import json, re, sys
r = json.load(open(sys.argv[1]))
got = dict(re.findall(r"(\w+): test accuracy (\S+)", open(sys.argv[2]).read()))
for name, c in r["combiners"].items():
    assert float(got[name]) == c["test_accuracy"], (name, got, c)
print("ok: strata predict on the ensemble reproduces", {k: c["test_accuracy"] for k, c in r["combiners"].items()})
PY

# SIGKILL on 4 ranks once a member has written a checkpoint, then resumed on 2 ranks.
members_done() { [ -f out/ensemble/trials.jsonl ] && wc -l < out/ensemble/trials.jsonl || echo 0; }
member_checkpoints() { ls out/checkpoints/stage1/member*/ckpt-*.h5 2>/dev/null | wc -l; }
("$MPIEXEC" -n 4 "$STRATA" run pipeline.yaml > killed.log 2>&1) 2>/dev/null &
for _ in $(seq 1200); do [ "$(member_checkpoints)" -ge 1 ] && break; sleep 0.02; done
pkill -KILL -f "strata run pipeline.yaml"
wait
echo "killed with $(members_done) ensemble member(s) done"
[ ! -f out/ensemble_report.json ] || { echo "FAIL: the ensemble ended before it was killed"; fails=$((fails + 1)); }
expect_exit 0 '\[resume\] member [0-2]: from .*ckpt-' -- "$MPIEXEC" -n 2 "$STRATA" run pipeline.yaml
for report in ensemble_report.json transfer_report.json; do
  if [ -f out/$report ] && diff <(sed 's|out/|DIR/|g' out/$report) <(sed 's|ref/|DIR/|g' ref/$report); then
    echo "ok: killed mid-ensemble on 4 ranks, resumed on 2: the same $report"
  else
    echo "FAIL: the resumed run's $report differs"; fails=$((fails + 1))
  fi
done

# Members by seeds, bootstrap samples and pixel regions of one config, on 2 ranks.
variations() {  # $1: dir, $2: the ensemble's settings
  cat <<YAML
run: {name: e2e_variations, seed: 2, threads: 1}
data: {source: synthetic, synthetic: {train: 600, test: 200, classes: 4, channels: 1, height: 8, width: 8}}
model: {layers: [flatten, {dense: {units: 16, init: glorot}}, relu, {dense: {units: 4, init: glorot}}]}
training: {epochs: 2, local_batch: 32, optimizer: {type: sgd, lr: 0.1}}
stages:
  - ensemble: $2
output: {dir: $1, progress_seconds: 100}
YAML
}
variations seeds '{seeds: 3, combiners: [mean, vote]}' > seeds.yaml
variations bagging '{bagging: 2}' > bagging.yaml
variations subsets '{feature_subsets: [{rows: [0, 4]}, {rows: [4, 8]}, {cols: [2, 6]}]}' > subsets.yaml
expect_exit 0 'ensemble\] 3 members \(1 config\(s\) x 3\)' -- "$MPIEXEC" -n 2 "$STRATA" run seeds.yaml
expect_exit 0 'ensemble\] 2 members \(1 config\(s\) x 2\)' -- "$MPIEXEC" -n 2 "$STRATA" run bagging.yaml
expect_exit 0 'ensemble\] 3 members \(1 config\(s\) x 3\)' -- "$MPIEXEC" -n 2 "$STRATA" run subsets.yaml
# Between results a line every progress_seconds names the members in training.
variations slow '{seeds: 2}' | sed -e 's/train: 600/train: 8000/' -e 's/units: 16/units: 1024/' \
  -e 's/epochs: 2/epochs: 12/' -e 's/progress_seconds: 100/progress_seconds: 0.1/' > slow.yaml
expect_exit 0 '^\[ensemble\] 0/2 done, 2 running: member [01] \(the run.s config, seed [01]\) on group [01] for [0-9]s, member' -- \
  "$MPIEXEC" -n 2 "$STRATA" run slow.yaml
"$PYTHON3" - <<'PY' || fails=$((fails + 1))
import json
s = json.load(open("seeds/ensemble_report.json"))
assert [m["variation"] for m in s["members"]] == ["seed 0", "seed 1", "seed 2"]
assert len({m["seed"] for m in s["members"]}) == 3
assert sorted(s["combiners"]) == ["mean", "vote"]
b = json.load(open("bagging/ensemble_report.json"))
assert [m["variation"] for m in b["members"]] == ["bootstrap sample 0", "bootstrap sample 1"]
f = json.load(open("subsets/ensemble_report.json"))
assert [m["variation"] for m in f["members"]] == ["rows 0-4, cols all, channels all", "rows 4-8, cols all, channels all", "rows all, cols 2-6, channels all"]
assert f["members"][0]["feature_subset"]["row_end"] == 4
import h5py
import numpy as np
# Members that saw different pixels predict differently.
p = [h5py.File(f"subsets/ensemble/{i}/predictions.h5")["test"][:] for i in range(3)]
assert p[0].shape == (200, 4) and not np.array_equal(p[0], p[1]) and not np.array_equal(p[1], p[2])
print("ok: seeds, bagging and feature subsets make their members")
PY
expect_exit 0 'vote: test accuracy' -- "$STRATA" predict subsets.yaml subsets/ensemble_report.json
finish
