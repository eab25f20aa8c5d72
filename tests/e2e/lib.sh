# Helpers for strata's end-to-end test scripts (sourced). $STRATA is the binary under test.
set -uo pipefail
fails=0
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# expect_exit CODE PATTERN -- CMD...: runs CMD, checks its exit code and that stderr+stdout match PATTERN.
expect_exit() {
  local want="$1" pattern="$2"
  shift 3
  local out rc
  out="$(timeout 120 "$@" 2>&1)"
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

finish() {
  if [ "$fails" -gt 0 ]; then echo "$fails check(s) failed"; exit 1; fi
  echo "all checks passed"
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
