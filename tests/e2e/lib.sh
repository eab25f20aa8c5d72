# Helpers for strata's end-to-end test scripts (sourced). $STRATA is the binary under test.
set -uo pipefail
fails=0
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# The tests' Python, with h5py and numpy: Debian's (jobs/install_deps.sh installs them), not a pyenv
# one on PATH; STRATA_TEST_PYTHON names another (tests/gpu/device_checks.sh: the GPU machine's).
PYTHON3="${STRATA_TEST_PYTHON:-/usr/bin/python3}"

# expect_exit CODE PATTERN -- CMD...: runs CMD, checks its exit code and that stderr+stdout match PATTERN.
# CMD gets $expect_seconds (default 120) before it is stopped (SIGTERM, then SIGKILL 10 s later: an
# mpiexec whose ranks hang may outlive the first).
expect_exit() {
  local want="$1" pattern="$2"
  shift 3
  local out rc
  out="$(timeout -k 10 "${expect_seconds:-120}" "$@" 2>&1)"
  rc=$?
  if [ "$rc" != "$want" ]; then
    echo "FAIL: '$*' exited $rc, expected $want. Output:"; echo "$out" | tail -5
    fails=$((fails + 1))
  elif ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL: '$*' output lacks /$pattern/. Output:"; echo "$out" | tail -5
    fails=$((fails + 1))
  else
    echo "ok: exit $rc, $(grep -E -m1 -- "$pattern" <<<"$out")"
  fi
}

# On a GPU machine run.device's default (auto) trains on the GPU, so these CPU tests check the GPU
# path there. tests/gpu/device_checks.sh sets STRATA_E2E_EXPECT_GPU=1: then every epoch row of every
# metrics.jsonl under run directory $1 (each training, trial and member) must say it ran on a GPU.
# Elsewhere it checks nothing.
expect_gpu_training() {
  [ -n "${STRATA_E2E_EXPECT_GPU:-}" ] || return 0
  "$PYTHON3" - "$1" <<'PY' || fails=$((fails + 1))
import json, pathlib, sys
files = sorted(pathlib.Path(sys.argv[1]).rglob("metrics.jsonl"))
rows = [(f, json.loads(l)) for f in files for l in open(f) if l.strip()]
off = [f"{f}: epoch {r['epoch']} on {r.get('device')}" for f, r in rows
       if not str(r.get("device", "")).startswith("GPU")]
if not rows or off:
    print(f"FAIL: not every training in {sys.argv[1]} ran on the GPU:", off[:3] or "no metrics rows")
    sys.exit(1)
print(f"ok: all {len(rows)} epochs of {len(files)} trainings in {sys.argv[1]} ran on {rows[0][1]['device']}")
PY
}

finish() {
  if [ "$fails" -gt 0 ]; then echo "$fails check(s) failed"; exit 1; fi
  echo "all checks passed"
}

# metrics.jsonl of run directory $1 without the wall-clock fields, one row per line.
metrics_without_timing() {
  "$PYTHON3" -c '
import json, sys
for line in open(sys.argv[1]):
    print({k: v for k, v in json.loads(line).items() if k not in ("seconds", "samples_per_s")})' "$1/metrics.jsonl"
}

# trials.csv of run directory $1 by trial id, without the columns that depend on timing and on
# which member group ran a trial.
trials_without_timing() {
  "$PYTHON3" - "$1/trials.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
for r in sorted(rows, key=lambda r: int(r["trial"])):
    print({k: v for k, v in r.items() if k not in ("seconds", "ended_s", "member_group")})
PY
}

# A small synthetic config; $1 = output dir, $2 = extra YAML appended under training (optional).
write_synthetic_config() {
  cat <<YAML
run: {name: e2e, seed: 3, threads: 2}
data:
  source: synthetic
  synthetic: {train: 1200, test: 300, classes: 4, channels: 1, height: 8, width: 8}
model:
  layers:
    - conv2d: {filters: 4, kernel: 3, init: glorot}
    - relu
    - maxpool2d: {size: 2}
    - flatten
    - dense: {units: 4, init: glorot}
training:
  epochs: 2
  local_batch: 32
  optimizer: {type: sgd, lr: 0.05, momentum: 0.9}
output: {dir: $1, progress_seconds: 0.001}
YAML
}
