#!/usr/bin/env bash
# Accuracy on the real Fashion-MNIST: configs/fashion_cnn.yaml (the benchmark CNN, 5 epochs) must reach 0.89
# test accuracy, and configs/quickstart.yaml 0.85, as PyTorch does with the same models.
STRATA="$1"
source "$(dirname "$0")/lib.sh"
check_accuracy() {
  local config="$1" floor="$2" name
  name="$(basename "$config" .yaml)"
  local t0=$SECONDS
  # The config as shipped: its data path is read from its own directory.
  if ! timeout 600 "$STRATA" run "$config" --set "output.dir=$work/$name" > "$work/$name.log" 2>&1; then
    echo "FAIL: $config did not run"; tail -5 "$work/$name.log"; fails=$((fails + 1)); return
  fi
  local acc
  acc=$("$PYTHON3" -c 'import json,sys; print([json.loads(l) for l in open(sys.argv[1])][-1]["test_accuracy"])' \
    "$work/$name/metrics.jsonl")
  if "$PYTHON3" -c "import sys; sys.exit(0 if $acc >= $floor else 1)"; then
    echo "ok: $config test accuracy $acc >= $floor ($((SECONDS - t0)) s)"
  else
    echo "FAIL: $config test accuracy $acc < $floor"; grep '^\[epoch' "$work/$name.log"; fails=$((fails + 1))
  fi
}
check_accuracy configs/quickstart.yaml 0.85
check_accuracy configs/fashion_cnn.yaml 0.89
finish
