#!/usr/bin/env bash
# run.json: after a 4-rank, 4-group run it holds the config as given, as resolved and with every
# default, the build, libraries, kernels, environment, plan and hosts; each allocation adds an
# entry with its exit status, a failed one with its error.
STRATA="$1"
source "$(dirname "$0")/lib.sh"
MPIEXEC="$(command -v mpiexec.mpich || command -v mpiexec)"
cd "$work"
cat > record.yaml <<'YAML'
run: {name: record, seed: 3, threads: 1}
data: {source: synthetic, synthetic: {train: 512, test: 128, classes: 4, channels: 1, height: 8, width: 8}}
model: {layers: [flatten, {dense: {units: 4}}]}
training: {epochs: 2, local_batch: 32}
output: {dir: "runs/${STRATA_RECORD_ID:-unnamed}"}
YAML
STRATA_RECORD_ID=r1 ONEDNN_MAX_CPU_ISA=AVX2 expect_exit 0 '\[run\] done' -- \
  "$MPIEXEC" -n 4 "$STRATA" run record.yaml --set training.epochs=3
STRATA_RECORD_ID=r1 expect_exit 0 'every stage is done' -- "$MPIEXEC" -n 2 "$STRATA" run record.yaml --set training.epochs=3
"$PYTHON3" - runs/r1/run.json <<'PY' || fails=$((fails + 1))
import json, sys
r = json.load(open(sys.argv[1]))
c = r["config"]
checks = {
    "as given keeps ${...}": "${STRATA_RECORD_ID:-unnamed}" in c["as_given"],
    "resolved has the expansion and the override": "runs/r1" in c["resolved"] and "epochs: 3" in c["resolved"],
    "overrides": c["overrides"] == ["training.epochs=3"],
    "effective: the override": c["effective"]["training"]["epochs"] == 3,
    "effective: a default": c["effective"]["training"]["optimizer"]["type"] == "sgd"
        and c["effective"]["parallel"]["layout"] == "members" and c["effective"]["checkpoint"]["keep"] == 2,
    "effective: layers": [l["kind"] for l in c["effective"]["model"]["layers"]] == ["flatten", "dense"],
    "version and revision": r["strata"]["version"] and r["strata"]["git_revision"],
    "compiler and flags": r["build"]["compiler"] and "-O" in r["build"]["flags"],
    "libraries": r["libraries"]["mpi"].startswith("MPICH") and r["libraries"]["hdf5"].startswith("1.")
        and r["libraries"]["onednn"].startswith("2.") and "openblas" not in r["libraries"],
    "kernels": r["allocations"][0]["kernels"]["onednn_isa"] == "avx2" and r["allocations"][0]["kernels"]["cpu"]
        and (r["allocations"][1]["kernels"]["onednn_isa"] != "avx2" or r["allocations"][1]["kernels"]["cpu"] != "avx512"),
    "environment": r["allocations"][0]["environment"]["ONEDNN_MAX_CPU_ISA"] == "AVX2"
        and "SLURM_JOB_ID" in r["allocations"][0]["environment"],
    "two allocations": len(r["allocations"]) == 2,
    "first: 4 ranks, G 4, ended 0": r["allocations"][0]["world_size"] == 4
        and sum(h["ranks"] for h in r["allocations"][0]["hosts"]) == 4
        and all(isinstance(h["gpus"], int) and h["gpus"] >= 0 for h in r["allocations"][0]["hosts"])
        and r["allocations"][0]["kernels"]["run_device"] == "auto"
        and "G 4 member groups" in r["allocations"][0]["plan"]
        and r["allocations"][0]["exit_status"] == 0 and r["allocations"][0]["ended"],
    "second: 2 ranks, ended 0": r["allocations"][1]["world_size"] == 2 and r["allocations"][1]["exit_status"] == 0,
}
bad = [k for k, ok in checks.items() if not ok]
print("FAIL: run.json: " + ", ".join(bad) if bad else "ok: run.json holds " + ", ".join(checks))
sys.exit(1 if bad else 0)
PY
# A run that fails records its exit status and error.
sed -e 's|source: synthetic, synthetic: {[^}]*}|source: hdf5, path: absent.h5|' record.yaml > failing.yaml
STRATA_RECORD_ID=r2 expect_exit 3 'absent.h5' -- "$STRATA" run failing.yaml
"$PYTHON3" - runs/r2/run.json <<'PY' || fails=$((fails + 1))
import json, sys
a = json.load(open(sys.argv[1]))["allocations"][-1]
ok = a["exit_status"] == 3 and "absent.h5" in a.get("error", "") and a["ended"]
print("ok: a failed run records exit 3 and its error" if ok else f"FAIL: failed run's entry: {a}")
sys.exit(0 if ok else 1)
PY
finish
