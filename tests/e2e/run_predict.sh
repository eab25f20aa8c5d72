#!/usr/bin/env bash
# `strata run` writes metrics.jsonl and weights.h5 and prints progress; `strata predict` reproduces the
# final test accuracy from the weights; a second run finds the run done, and --fresh keeps the old run.
STRATA="$1"
source "$(dirname "$0")/lib.sh"
cd "$work"
# Real data, a subset: accuracy well below 1, so that predict matching it means something.
write_synthetic_config "$work/out" | sed "s|source: synthetic|source: hdf5\n  path: $OLDPWD/data/fashion_mnist.h5\n  train_subset: 3000\n  test_subset: 1000|; /synthetic:/d; s/units: 4,/units: 10,/" > synth.yaml

expect_exit 0 '\[train\] epoch 1/2 step [0-9]+/84 loss' -- "$STRATA" run synth.yaml
lines=$(wc -l < out/metrics.jsonl)
[ "$lines" = 2 ] || { echo "FAIL: metrics.jsonl has $lines lines, expected 2"; fails=$((fails + 1)); }
"$PYTHON3" - out/metrics.jsonl <<'PY' || fails=$((fails + 1))
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
need = {"epoch", "train_loss", "val_accuracy", "test_accuracy", "samples_per_s", "seconds", "device"}
for r in rows:
    missing = need - r.keys()
    assert not missing, f"metrics.jsonl lacks {missing}"
assert [r["epoch"] for r in rows] == [1, 2]
# Where the passes ran: the CPU here, or under run.device auto the GPU where there is one.
assert all(r["device"] == "CPU" or r["device"].startswith("GPU ") for r in rows), rows
assert 0.5 < rows[-1]["test_accuracy"] < 0.99, f"subset test accuracy {rows[-1]['test_accuracy']} <= 0.9"
print("ok: metrics.jsonl has the keys; final test accuracy", rows[-1]["test_accuracy"])
PY
h5ls -r out/weights.h5 | grep -q '/weights/conv2d_0/weight  *Dataset {4, 1, 3, 3}' \
  || { echo "FAIL: weights.h5 lacks /weights/conv2d_0/weight [4,1,3,3]"; h5ls -r out/weights.h5; fails=$((fails + 1)); }

# Exactly the run's numbers, on another thread count than the run's 2.
want=$("$PYTHON3" -c 'import json,sys; r=[json.loads(l) for l in open(sys.argv[1])][-1]; print(repr(r["test_accuracy"]), "loss", repr(r["test_loss"]))' out/metrics.jsonl)
expect_exit 0 "test accuracy $want " -- "$STRATA" predict synth.yaml out/weights.h5 --threads 1
expect_exit 0 "test accuracy $want " -- "$STRATA" predict synth.yaml out/weights.h5 --threads 3

expect_exit 0 'resuming in .*every stage is done' -- "$STRATA" run synth.yaml
expect_exit 0 'moved to .*out.previous-1' -- "$STRATA" run synth.yaml --fresh
[ -f out.previous-1/weights.h5 ] || { echo "FAIL: --fresh lost the earlier weights"; fails=$((fails + 1)); }

# The same config and thread count give bit-identical weights.
h5dump -d /weights/dense_4/weight out/weights.h5 > a.txt
h5dump -d /weights/dense_4/weight out.previous-1/weights.h5 > b.txt
if diff -q <(grep -v HDF5 a.txt) <(grep -v HDF5 b.txt) >/dev/null; then echo "ok: two runs gave identical weights"
else echo "FAIL: two runs of one config differ"; fails=$((fails + 1)); fi
finish
