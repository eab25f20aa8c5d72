#!/usr/bin/env bash
# `strata calibrate` on 2 real ranks writes a calibration that `strata plan --predict` reads: one
# table row per rank count, with model-parallel time where M > 1 and data-parallel time where D > 1;
# on 4 ranks it also times pairs of shards at once, which a D 2 x M 2 plan on that node takes its
# slowdown from; bad input (no calibration, another local batch, an unknown network, a calibration
# launched across nodes) is a clear error.
STRATA="$1"
source "$(dirname "$0")/lib.sh"
root="$PWD"
MPIEXEC="$(command -v mpiexec.mpich || command -v mpiexec)"
cd "$work"
config="$root/configs/parallel.yaml"
fast=(--steps 20 --repeats 1 --set data.train_subset=2000 --set run.threads=0)

expect_exit 0 'wrote cal.json' -- "$MPIEXEC" -n 2 "$STRATA" calibrate "$config" "${fast[@]}" --out cal.json
"$PYTHON3" - cal.json <<'PY' || fails=$((fails + 1))
import json, sys
c = json.load(open(sys.argv[1]))
assert c["format"] == "strata-calibration" and c["local_batch"] == 32, c
names = [l["name"] for l in c["layers"]]
assert names[0] == "conv2d_0" and names[-1] == "dense_9", names
split = {l["name"]: l["split"] for l in c["layers"]}
assert split["conv2d_3"] == "column" and split["dense_7"] == "column" and split["dense_9"] == "row", split
dense7 = next(l for l in c["layers"] if l["name"] == "dense_7")
assert dense7["tensors"] == [128 * 512, 128] and not dense7["gathers_output"], dense7
assert all(l["forward_s"] > 0 for l in c["layers"] if l["tensors"]), c["layers"]
assert c["steps"][0]["threads"] == 1 and c["steps"][0]["step_s"] > 0, c["steps"]
assert c["intra_node"]["ranks"] == 2 and c["intra_node"]["bytes_per_s"] > 0, c.get("intra_node")
assert c["split_over_2"]["step_s"] > 0, c.get("split_over_2")
shared = c["intra_node"]["shared_steps"]
assert shared[0]["threads"] == 1 and all(s["step_s"] > 0 for s in shared), c["intra_node"]
# Each rank's share of the cores is a thread count timed alone too, to compare the shared step with.
alone = {s["threads"] for s in c["steps"]}
assert all(s["threads"] in alone for s in shared), (shared, c["steps"])
assert "all_pairs_step_s" not in c["split_over_2"], c["split_over_2"]  # 2 ranks: one pair
pairs = c["intra_node"]["replica_pairs_step"]
assert pairs["threads"] == shared[-1]["threads"] and pairs["step_s"] > 0, pairs
# Each arrangement's single steps over their mean, 40 quantiles, and the split step's (on 2 ranks
# the shard pairs' arrangement).
for spread in [s["spread"] for s in shared + [pairs]] + [c["split_over_2"]["spread"]]:
    assert len(spread) == 40 and min(spread) > 0 and spread == sorted(spread), spread
print("ok: the calibration has every layer, its splits, thread steps, the 2-rank MPI figures, a step split over 2 ranks, 2 ranks stepping at once and as a pair of replicas")
PY

# The ranks' steps at once mean something only on one node: a launch over (pretended) nodes is
# refused on every rank, before any is timed.
expect_exit 2 'strata calibrate times one node: its 2 ranks span nodes' -- \
  env STRATA_RANKS_PER_NODE=1 "$MPIEXEC" -n 2 "$STRATA" calibrate "$config" "${fast[@]}" --out spread.json
[ ! -e spread.json ] || { echo "FAIL: a refused calibration wrote spread.json"; fails=$((fails + 1)); }

# 4 ranks: two pairs also step split at the same time, and a D 2 x M 2 plan on this node is
# slowed by what they measured, not by the unsplit ranks' slowdown.
expect_exit 0 '2 pairs of ranks stepping split at once' -- \
  "$MPIEXEC" -n 4 "$STRATA" calibrate "$config" "${fast[@]}" --out cal4.json
dm="$("$STRATA" plan "$config" --predict --set run.threads=0 --calibration cal4.json --ranks 4 \
  --network local --set parallel.data=2 --set parallel.model=2)"
"$PYTHON3" - cal4.json "$dm" <<'PY' || fails=$((fails + 1))
import json, re, sys
c = json.load(open(sys.argv[1]))
pairs = c["split_over_2"]["all_pairs_step_s"] / c["split_over_2"]["step_s"]
# The pairs' single steps over their mean, at 40 quantiles: the two replicas of the plan wait each
# step for the slower pair, the expected larger of two draws.
spread = sorted(c["split_over_2"]["all_pairs_spread"])
assert len(spread) == 40 and spread[0] > 0 and abs(sum(spread) / 40 - 1) < 0.05, spread
n = len(spread)
slower = sum(x * ((i + 1) ** 2 - i ** 2) for i, x in enumerate(spread)) / n ** 2 / (sum(spread) / n)
# Measured steps are never all alike: the slower of two is longer than the mean, and the table
# says by how much.
assert slower > 1.005, (slower, spread)
shown = re.search(r"\| 4 \| 1 \| 1 x 2 x 2 \|.*?\(([0-9.]+)x, measured: shard pairs, "
                  r"([0-9.]+)x of it the slowest of 2 replicas\)", sys.argv[2])
assert shown, sys.argv[2]
assert abs(float(shown.group(2)) - slower) < 0.006, (shown.group(2), slower)
assert abs(float(shown.group(1)) - pairs * slower) < 0.006, (shown.group(1), pairs, slower)
print(f"ok: D 2 x M 2 on the 4 calibrated ranks is slowed {pairs:.2f}x, as the pairs measured, "
      f"times {slower:.2f} for the slower of its two replicas")
PY

plan=("$STRATA" plan "$config" --predict --set run.threads=0)
predict=("${plan[@]}" --calibration cal.json)
expect_exit 0 '^\| 4 \| 1 \| 2 x 2 x 1 \| 64 \| ' -- "${predict[@]}" --ranks 2,4 --network local
expect_exit 0 '^\| 2 \| 2 \| 1 x 2 x 1 \| 64 \| ' -- "${predict[@]}" --ranks 2,4 --ranks-per-node 1
out="$("${predict[@]}" --ranks 4,8 --ranks-per-node 1 --network slingshot --set parallel.model=2)"
"$PYTHON3" - "$out" <<'PY' || fails=$((fails + 1))
import sys
rows = [l.split("|")[1:-1] for l in sys.argv[1].splitlines() if l.startswith("| 4 ") or l.startswith("| 8 ")]
assert len(rows) == 2, sys.argv[1]
for r in rows:
    model_s, data_s, speedup = float(r[7]), float(r[8]), float(r[11])
    assert model_s > 0, r  # M = 2 across nodes pays for activations
    assert speedup > 0, r
assert float(rows[0][8]) > 0  # 4 ranks: D = 2
print("ok: M = 2 rows pay model-parallel time and D = 2 rows data-parallel time")
PY
# The faster the network, the shorter the predicted step of a group spread over nodes.
slow="$("${predict[@]}" --ranks 4 --ranks-per-node 1 --inter-gbs 0.01 | awk -F'|' '/^\| 4 /{print $7}')"
fast_net="$("${predict[@]}" --ranks 4 --ranks-per-node 1 --inter-gbs 100 | awk -F'|' '/^\| 4 /{print $7}')"
if "$PYTHON3" -c "import sys; sys.exit(not float('$slow') > float('$fast_net'))"; then
  echo "ok: --inter-gbs 0.01 predicts $slow ms, 100 GB/s $fast_net ms"
else
  echo "FAIL: a slower network did not lengthen the step ($slow vs $fast_net ms)"; fails=$((fails + 1))
fi

expect_exit 3 'no calibration at none.json: run `strata calibrate' -- \
  "${plan[@]}" --ranks 2 --calibration none.json
expect_exit 2 'measured at local batch 32, the plan trains local batch 16' -- \
  "${predict[@]}" --ranks 2 --set training.local_batch=16
expect_exit 2 'network: ethernet not in \{aries,slingshot,local\}' -- \
  "${predict[@]}" --ranks 2 --network ethernet
echo '{"format": "something"}' > other.json
expect_exit 3 'other.json: not a strata calibration' -- "${plan[@]}" --ranks 2 --calibration other.json
"$STRATA" calibrate "$config" "${fast[@]}" --out one_rank.json > /dev/null
expect_exit 2 'calibrate under mpiexec -n 2' -- \
  "${plan[@]}" --ranks 2 --calibration one_rank.json --network local
# A split that 2 ranks cannot halve (a config meant for M = 3) is calibrated unsplit, not aborted.
expect_exit 0 'does not divide over 2 ranks' -- "$MPIEXEC" -n 2 "$STRATA" calibrate "$config" "${fast[@]}" \
  --set 'model.layers[7].dense.units=129' --out odd.json
if "$PYTHON3" -c 'import json, sys; sys.exit("split_over_2" in json.load(open("odd.json")))'; then
  echo "ok: the odd split's calibration has no split step"
else
  echo "FAIL: odd.json has a split step"; fails=$((fails + 1))
fi
finish
