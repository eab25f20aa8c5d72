#!/usr/bin/env bash
# output.trace: a D=2 training on 2 ranks writes one trace.json that parses as JSON, with a track
# (pid) per rank, each named, and on each the events of a step: data reads, forward and backward
# per layer, the gradient allreduce, optimizer steps, evaluation and checkpoints; a stopped run
# writes its trace too. Without output.trace there is no file.
STRATA="$1"
source "$(dirname "$0")/lib.sh"
MPIEXEC="$(command -v mpiexec.mpich || command -v mpiexec)"
cd "$work"
cat > trace.yaml <<'YAML'
run: {name: trace, seed: 3, threads: 1}
data: {source: synthetic, synthetic: {train: 1024, test: 128, classes: 4, channels: 1, height: 8, width: 8}}
model:
  layers:
    - conv2d: {filters: 4, kernel: 3}
    - relu
    - flatten
    - dense: {units: 16}
    - relu
    - dense: {units: 4}
training: {epochs: 2, local_batch: 32}
parallel: {data: 2, max_global_batch: 64, allreduce: mpi}
output: {dir: traced, trace: true}
YAML
expect_exit 0 'trace of 2 rank\(s\) in .*traced/trace.json' -- "$MPIEXEC" -n 2 "$STRATA" run trace.yaml
"$PYTHON3" - traced/trace.json <<'PY' || fails=$((fails + 1))
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
complete = [e for e in events if e["ph"] == "X"]
names = {(e["pid"], e["args"]["name"]) for e in events if e["name"] == "process_name"}
assert names == {(0, "rank 0"), (1, "rank 1")}, names
assert {e["pid"] for e in complete} == {0, 1}
assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in complete)
for rank in (0, 1):
    mine = [e["name"] for e in complete if e["pid"] == rank]
    count = lambda name: sum(n == name for n in mine)
    steps = count("optimizer step")  # 2 epochs of the training split (0.9 of 1024) in batches of 64
    assert steps == 2 * (1024 * 9 // 10 // 64), (rank, steps)
    for name in ("data read", "backward conv2d_0", "backward dense_5"):
        assert count(name) == steps, (rank, name, count(name))
    assert count("forward conv2d_0") >= steps, rank  # evaluation runs forward too
    assert sum(n.startswith("allreduce bucket 0") for n in mine) == steps, rank
    assert count("evaluate") == 2 * 2, (rank, count("evaluate"))  # validation and test, 2 epochs
    assert count("checkpoint snapshot") == 2, rank
assert sum(e["name"] == "checkpoint write" for e in complete if e["pid"] == 0) == 2
print(f"ok: trace.json: {len(complete)} events on 2 named tracks, {steps} steps each")
PY
# With allreduce auto, 2 replicas on one node sum through the shared window: one sum per step.
sed -e 's/dir: traced/dir: window/' -e 's/, allreduce: mpi//' trace.yaml > window.yaml
expect_exit 0 'trace of 2 rank' -- "$MPIEXEC" -n 2 "$STRATA" run window.yaml
"$PYTHON3" - window/trace.json <<'PY' || fails=$((fails + 1))
import json, sys
complete = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e["ph"] == "X"]
for rank in (0, 1):
    mine = [e["name"] for e in complete if e["pid"] == rank]
    steps = sum(n == "optimizer step" for n in mine)
    assert sum(n.startswith("hierarchical allreduce") for n in mine) == steps > 0, rank
    assert not any(n.startswith("allreduce bucket") for n in mine), rank
print(f"ok: allreduce auto on one node: one hierarchical sum per step, {steps} steps")
PY
# A run stopped by the signal writes the trace of what it did.
sed -e 's/dir: traced/dir: stopped/' -e 's/epochs: 2/epochs: 4/' trace.yaml > stop.yaml
STRATA_FAULT=stop_at_step=20 expect_exit 75 'trace of 2 rank' -- "$MPIEXEC" -n 2 "$STRATA" run stop.yaml
[ -s stopped/trace.json ] || { echo "FAIL: the stopped run wrote no trace"; fails=$((fails + 1)); }
sed -e 's/dir: traced/dir: plain/' -e 's/, trace: true//' trace.yaml > plain.yaml
expect_exit 0 '\[run\] done' -- "$MPIEXEC" -n 2 "$STRATA" run plain.yaml
[ ! -e plain/trace.json ] || { echo "FAIL: a run without output.trace wrote trace.json"; fails=$((fails + 1)); }
finish
