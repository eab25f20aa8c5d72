#!/usr/bin/env bash
# Job-array style runs from one config: three runs with --set run.seed=N and an output directory
# expanded from the environment (dir: runs/${STRATA_TEST_ID}), each in its own directory with its
# own results; a search's best.yaml records the expanded and overridden values; an unset variable,
# a bad override and a variable that differs between ranks are config errors that say so.
STRATA="$1"
source "$(dirname "$0")/lib.sh"
MPIEXEC="$(command -v mpiexec.mpich || command -v mpiexec)"
cd "$work"

cat > array.yaml <<'YAML'
run: {name: array, seed: 1, threads: 1}
data: {source: synthetic, synthetic: {train: 600, test: 200, classes: 4, channels: 1, height: 8, width: 8}}
model: {layers: [flatten, {dense: {units: 16, init: glorot}}, relu, {dense: {units: 4, init: glorot}}]}
training: {epochs: 2, local_batch: 32, optimizer: {type: sgd, lr: 0.1}}
output:
  dir: runs/${STRATA_TEST_ID}
  progress_seconds: 100
YAML
for task in 1 2 3; do
  expect_exit 0 "Results: runs/task$task/members/<m>/metrics.jsonl" -- \
    env STRATA_TEST_ID="task$task" "$MPIEXEC" -n 2 "$STRATA" run array.yaml --set run.seed=$((task * 10)) --set data.synthetic.train=400
done
"$PYTHON3" - <<'PY' || fails=$((fails + 1))
import json
rows = {t: [json.loads(l) for l in open(f"runs/task{t}/members/0/metrics.jsonl")] for t in (1, 2, 3)}
assert all(len(r) == 2 for r in rows.values()), rows
losses = {rows[t][-1]["train_loss"] for t in rows}
assert len(losses) == 3, losses  # three seeds, three trainings
print("ok: three runs of one config in runs/task1..3, each with its own seed")
PY
expect_exit 2 'array.yaml:6:8: environment variable STRATA_TEST_ID is not set' -- env -u STRATA_TEST_ID "$STRATA" run array.yaml
[ ! -e 'runs/${STRATA_TEST_ID}' ] || { echo "FAIL: a literal \${STRATA_TEST_ID} directory was made"; fails=$((fails + 1)); }
expect_exit 2 "--set training.epochs=0: training.epochs: expected a positive integer, got 0" -- \
  env STRATA_TEST_ID=bad "$STRATA" run array.yaml --set training.epochs=0
expect_exit 2 "--set trainig.epochs=2: trainig: unknown key" -- env STRATA_TEST_ID=bad "$STRATA" run array.yaml --set trainig.epochs=2
# A variable that differs between ranks would give them different configs.
expect_exit 2 'the ranks read different configs' -- \
  "$MPIEXEC" -n 1 -env STRATA_TEST_ID x "$STRATA" run array.yaml : -n 1 -env STRATA_TEST_ID y "$STRATA" run array.yaml
# A search's best.yaml is the config as run: expanded and overridden.
cat > search.yaml <<'YAML'
run: {name: search, seed: 1, threads: 1}
data: {source: synthetic, synthetic: {train: 400, test: 100, classes: 4, channels: 1, height: 8, width: 8}}
model: {layers: [flatten, {dense: {units: $units}}, relu, {dense: {units: 4}}]}
training: {epochs: 1, local_batch: 32, optimizer: {type: sgd, lr: 0.1}}
stages: [{hpo: {algorithm: random, trials: 2, space: {units: {int: [4, 8]}}}}]
output:
  dir: runs/${STRATA_TEST_ID}
  progress_seconds: 100
YAML
expect_exit 0 'hpo\] best' -- env STRATA_TEST_ID=search "$STRATA" run search.yaml --set training.epochs=2
if grep -q 'epochs: 2' runs/search/best.yaml && grep -q 'dir: runs/search/best' runs/search/best.yaml &&
   ! grep -q 'STRATA_TEST_ID' runs/search/best.yaml; then
  echo "ok: best.yaml holds the overridden and expanded values"
else
  echo "FAIL: best.yaml:"; cat runs/search/best.yaml; fails=$((fails + 1))
fi
finish
