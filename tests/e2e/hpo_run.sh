#!/usr/bin/env bash
# `mpiexec -n 4 strata run` with an hpo stage, each search writing a complete trials.csv, trials.jsonl
# and hpo_summary.json: a function-objective search of 10 dimensions; a small Fashion-MNIST search
# (subset, 1 epoch, population 4, 2 generations) on one-rank groups whose wide learning-rate range
# makes some trials diverge; the same on D=2 groups with a searched local batch; with a
# trial_timeout_s that stops every trial; on one D=2 x M=2 group, also with one rank failing to
# build every trial; and one on a disk that fills up (exit 3, no hang).
STRATA="$1"
source "$(dirname "$0")/lib.sh"
MPIEXEC="$(command -v mpiexec.mpich || command -v mpiexec)"
root="$PWD"
cd "$work"

cat > function.yaml <<YAML
run: {name: rastrigin, seed: 3}
model: {objective: rastrigin, dims: 10, eval_seconds: 0.002, eval_stddev_seconds: 0.002}
stages:
  - hpo: {algorithm: genetic, population: 20, generations: 10, elites: 2, demes: 2, migration_interval: 3}
output: {dir: $work/function}
YAML
# 164 trials, 34 of them repeated genomes (a parent copied, neither blended nor mutated) that took
# an earlier result instead of training.
expect_exit 0 '\[hpo\] 130 trainings \(34 repeated genomes took an earlier result\) in .*stopped: generations' -- "$MPIEXEC" -n 4 "$STRATA" run function.yaml
expect_exit 0 '\[hpo\] generation 10/10 done in [0-9.]+s: best' -- "$MPIEXEC" -n 4 "$STRATA" run function.yaml --fresh
sed -e 's/algorithm: genetic, population: 20, generations: 10, elites: 2, demes: 2, migration_interval: 3/algorithm: genetic, population: 3, generations: 2, elites: 1/' \
    -e "s|dir: $work/function|dir: $work/small_population|" function.yaml > small_population.yaml
# The TPE search on the same function: 60 trials on 4 member groups, 4 trainings always in flight
# (the trials in flight count as bad results, so the groups get different proposals); each row
# is a training, and the search ends when its trials are proposed.
sed -e 's/algorithm: genetic, population: 20, generations: 10, elites: 2, demes: 2, migration_interval: 3/algorithm: tpe, trials: 60, startup_trials: 8/' \
    -e "s|dir: $work/function|dir: $work/function_tpe|" function.yaml > function_tpe.yaml
expect_exit 0 '\[hpo\] 60 trainings in .*stopped: exhausted' -- "$MPIEXEC" -n 4 "$STRATA" run function_tpe.yaml
[ "$(tail -n +2 "$work/function_tpe/trials.csv" | wc -l)" = 60 ] ||
  { echo "FAIL: the TPE search's trials.csv has not 60 rows"; fails=$((fails + 1)); }
# The Gaussian-process search likewise: 30 trials, 4 in flight, none of them a repeat.
sed -e 's/algorithm: genetic, population: 20, generations: 10, elites: 2, demes: 2, migration_interval: 3/algorithm: gp, trials: 30, startup_trials: 6/' \
    -e "s|dir: $work/function|dir: $work/function_gp|" function.yaml > function_gp.yaml
expect_exit 0 '\[hpo\] 30 trainings in .*stopped: exhausted' -- "$MPIEXEC" -n 4 "$STRATA" run function_gp.yaml
[ "$(tail -n +2 "$work/function_gp/trials.csv" | grep -c ',ok,')" = 30 ] ||
  { echo "FAIL: the GP search's trials.csv has not 30 trainings"; fails=$((fails + 1)); }
# Long trainings leave no silent log: between results, a line every progress_seconds names the
# trials in flight (the coordinator learns nothing else from the other groups until they end).
cat > slow.yaml <<YAML
run: {name: slow, seed: 3}
model: {objective: rastrigin, dims: 2, eval_seconds: 1.5}
stages: [{hpo: {algorithm: random, trials: 2}}]
output: {dir: $work/slow, progress_seconds: 0.4}
YAML
expect_exit 0 '^\[hpo\] 0/2 done, 2 running: trial [01] on group [01] for [0-9]s, trial [01] on group [01] for [0-9]s \| best none \| ETA -$' -- \
  "$MPIEXEC" -n 2 "$STRATA" run slow.yaml
# Two searches of one space in one run: the second draws its own trials (its seeds derive from the
# stage), and the first's are those of a run with that search alone.
cat > two_searches.yaml <<YAML
run: {name: two, seed: 3, threads: 1}
data: {source: synthetic, synthetic: {train: 128, test: 32, classes: 2, channels: 1, height: 4, width: 4}}
model: {layers: [flatten, {dense: {units: 2}}]}
training: {epochs: 1, local_batch: 32, optimizer: {type: sgd, lr: \$lr}}
stages:
  - hpo: {algorithm: random, trials: 6, space: {lr: {log_uniform: [0.001, 0.1]}}}
  - hpo: {algorithm: random, trials: 6, space: {lr: {log_uniform: [0.001, 0.1]}}}
output: {dir: $work/two_searches}
YAML
head -6 two_searches.yaml > one_search.yaml
echo "output: {dir: $work/one_search}" >> one_search.yaml
expect_exit 0 'stage 2/2 \(hpo2\) done' -- "$MPIEXEC" -n 2 "$STRATA" run two_searches.yaml
expect_exit 0 'stage 1/1 \(hpo\) done' -- "$MPIEXEC" -n 2 "$STRATA" run one_search.yaml
"$PYTHON3" - "$work" <<'PY' || fails=$((fails + 1))
import csv, sys
w = sys.argv[1]
def genomes(path):
    return sorted(r["lr"] for r in csv.DictReader(open(path)))
first, second = genomes(f"{w}/two_searches/trials.csv"), genomes(f"{w}/two_searches/hpo2/trials.csv")
alone = genomes(f"{w}/one_search/trials.csv")
assert len(first) == len(second) == 6, (len(first), len(second))
assert first == alone, "the first search's trials differ from a run with it alone"
assert not set(first) & set(second), "the second search proposed the first one's trials"
print("ok: the second search of one space draws its own 6 trials; the first's are as alone")
PY
# A space in which no model builds (a kernel larger than the 8x8 input) is a config error before
# anything runs; one in which every trial fails (diverges) exits 1, not 0 with no best.
cat > nobuild.yaml <<YAML
run: {name: nb, seed: 3, threads: 1}
data: {source: synthetic, synthetic: {train: 256, test: 64, classes: 4, channels: 1, height: 8, width: 8}}
model: {layers: [{conv2d: {filters: 2, kernel: \$k}}, relu, flatten, {dense: {units: 4}}]}
training: {epochs: 1, local_batch: 32, optimizer: {type: sgd, lr: \$lr}}
output: {dir: $work/nobuild}
stages: [{hpo: {algorithm: genetic, population: 2, generations: 1, space: {k: {int: [9, 12]}, lr: {log_uniform: [1.0e+9, 1.0e+10]}}}}]
YAML
expect_exit 2 'nobuild.yaml:6:10: stages: hpo: space: no model the search can try builds \(4 probes.*kernel 9 does not fit the padded input 8x8' -- \
  "$MPIEXEC" -n 2 "$STRATA" run nobuild.yaml
expect_exit 2 'no model the search can try builds' -- "$STRATA" plan nobuild.yaml --ranks 2
[ ! -e "$work/nobuild" ] || { echo "FAIL: an unbuildable search created its output directory"; fails=$((fails + 1)); }
sed -e 's/int: \[9, 12\]/int: [2, 3]/' -e "s|$work/nobuild|$work/diverge|" nobuild.yaml > diverge.yaml
expect_exit 1 'search failed: every one of the 2 trials of the search failed; the first: trial 0: failed: training diverged' -- \
  "$MPIEXEC" -n 2 "$STRATA" run diverge.yaml
expect_exit 0 'runs at most 3 training\(s\) at once, so 1 of the G = 4 member groups will be idle' -- "$MPIEXEC" -n 4 "$STRATA" run small_population.yaml

sed -e "s|path: \.\./data/|path: $root/data/|" -e "s|dir: runs/fashion_hpo|dir: $work/fashion|" \
    -e 's/generations: 9/generations: 2/' -e 's/population: 10/population: 4/' \
    -e '/target: /d' -e '/max_trainings: /d' \
    -e 's/train_subset: 20000/train_subset: 3000/' -e 's/test_subset: 2000/test_subset: 500/' \
    -e 's/lr: {log_uniform: \[1.0e-4, 1.0\]}/lr: {log_uniform: [1.0e-3, 1.0e+3]}/' \
    "$root/configs/fashion_hpo.yaml" > fashion.yaml
grep -q 'population: 4' fashion.yaml && grep -q 'log_uniform: \[1.0e-3, 1.0e+3\]' fashion.yaml ||
  { echo "FAIL: configs/fashion_hpo.yaml no longer matches this test's edits"; fails=$((fails + 1)); }
expect_exit 0 'failed training diverged: the loss is' -- "$MPIEXEC" -n 4 "$STRATA" run fashion.yaml

# Member groups of D=2 ranks: 2 groups on 4 ranks. The run is planned for the largest local batch a
# trial can have (64, K=1); with accumulate: auto each trial accumulates to the bound 128 for its
# own local batch.
sed -e "s|dir: $work/fashion|dir: $work/fashion_d2|" -e 's/batch: {choice: \[16, 32, 64, 128, 256, 512\]}/batch: {choice: [16, 32, 64]}/' \
    fashion.yaml > fashion_d2.yaml
printf 'parallel: {data: 2, max_global_batch: 128, accumulate: auto}\n' >> fashion_d2.yaml
grep -q 'choice: \[16, 32, 64\]' fashion_d2.yaml || { echo "FAIL: fashion_d2.yaml lacks its batch choice"; fails=$((fails + 1)); }
expect_exit 0 'local batch: planned for 64, the largest a search trial can have' -- "$STRATA" plan fashion_d2.yaml --ranks 4
expect_exit 0 '\[hpo\] .* search over 7 parameters on 2 member groups, training on (the CPU|GPUs \(run.device)' -- "$MPIEXEC" -n 4 "$STRATA" run fashion_d2.yaml

# trial_timeout_s (1 us: less than any step) stops every trial after its first steps, alike on both
# ranks of each D=2 group; each is recorded as a timeout and the search goes on to its end, which
# then exits 1: a search without one good trial is no success.
sed -e "s|dir: $work/fashion_d2|dir: $work/fashion_timeout|" -e 's/fitness: val_accuracy/fitness: val_accuracy\n      trial_timeout_s: 1.0e-6/' \
    fashion_d2.yaml > fashion_timeout.yaml
expect_exit 1 'search failed: every one of the 7 trials of the search failed; the first: trial 0: timeout' -- \
  "$MPIEXEC" -n 4 "$STRATA" run fashion_timeout.yaml

# One member group of D=2 x M=2 ranks: the search runs its trials one after another, each sharded.
cat > fashion_m2.yaml <<YAML
run: {name: m2, seed: 2, threads: 1}
data: {source: hdf5, path: $root/data/fashion_mnist.h5, train_subset: 2000, test_subset: 500, validation_fraction: 0.2}
model:
  layers:
    - flatten
    - dense: {units: \$units, init: glorot, split: column}
    - relu
    - dense: {units: 10, init: glorot, split: row}
training: {epochs: 1, local_batch: 32, optimizer: {type: sgd, lr: \$lr, momentum: 0.9}}
parallel: {data: 2, model: 2, max_global_batch: 64}
stages:
  - hpo: {algorithm: genetic, population: 4, generations: 2, elites: 1, space: {lr: {log_uniform: [0.01, 0.1]}, units: {choice: [64, 96]}}}
output: {dir: $work/fashion_m2}
YAML
expect_exit 0 '\[hpo\] [0-9]+ trainings( \([0-9]+ repeated genomes took an earlier result\))?, [0-9]+ epochs in .*stopped: generations' -- "$MPIEXEC" -n 4 "$STRATA" run fashion_m2.yaml
# A failure on one rank of the group alone while a trial is built (STRATA_FAULT=fail_in_build: the
# last rank throws after the replicas' first collectives, as running out of memory would): every
# rank of the group fails the trial alike, with that rank's message, and the search goes on to its
# end (exit 1: no trial succeeded) instead of the other ranks waiting in the shared window's
# allocation for it. The same where it fails earlier, while the trial's config is prepared
# (fail_before_build): its peers must not go on into the build's own agreements.
for fault in fail_in_build fail_before_build; do
  sed -e "s|dir: $work/fashion_m2|dir: $work/$fault|" fashion_m2.yaml > $fault.yaml
  expect_seconds=60 expect_exit 1 "search failed: every one of the [0-9]+ trials of the search failed; the first: trial 0: failed: rank 3 of the member group: injected fault \\(STRATA_FAULT=$fault=3\\)" -- \
    env STRATA_FAULT=$fault=3 "$MPIEXEC" -n 4 "$STRATA" run $fault.yaml
done

# Pruning: 3-epoch trainings, the median rule after epoch 1 (once 2 other trials have a value
# there), and a budget of 30 epochs. Pruned trials are rows of their own (status pruned, their
# epochs, the partial fitness and the curve the rule saw); the budget stops the search.
cat > fashion_prune.yaml <<YAML
run: {name: prune, seed: 4, threads: 1}
data: {source: hdf5, path: $root/data/fashion_mnist.h5, train_subset: 2000, test_subset: 500, validation_fraction: 0.2}
model: {layers: [flatten, {dense: {units: 32, init: glorot}}, relu, {dense: {units: 10, init: glorot}}]}
training: {epochs: 3, local_batch: 32, optimizer: {type: sgd, lr: \$lr, momentum: 0.9}}
stages:
  - hpo: {algorithm: genetic, population: 6, generations: 40, prune: {rule: median, after_epochs: 1, min_trials: 2}, max_epochs: 30,
          space: {lr: {log_uniform: [1.0e-4, 0.3]}}}
output: {dir: $work/fashion_prune}
YAML
expect_exit 0 '\[hpo\] [0-9]+ trainings( \([0-9]+ repeated genomes took an earlier result\))?, [0-9]+ epochs, [1-9][0-9]* stopped early by the median rule in .*stopped: max_epochs' -- "$MPIEXEC" -n 2 "$STRATA" run fashion_prune.yaml
"$PYTHON3" - "$work/fashion_prune" <<'PY' || fails=$((fails + 1))
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/trials.jsonl")]
trained = [r for r in rows if r["status"] != "cached"]
pruned = [r for r in trained if r["status"] == "pruned"]
spent = sum(r["epochs"] for r in trained)
summary = json.load(open(sys.argv[1] + "/hpo_summary.json"))
assert summary["epochs"] == spent and spent >= 30, (summary["epochs"], spent)
# The budget was not spent before the last trainings were handed out (at most one per group after).
assert spent - sum(r["epochs"] for r in trained[-2:]) < 30, spent
for r in pruned:
    assert 1 <= r["epochs"] < 3 and r["fitness"] == r["curve"][-1] == r["val_accuracy"], r
    assert "stopped by the median rule after epoch" in r["reason"], r
for r in trained:
    if r["status"] == "ok":
        assert r["epochs"] == 3 and len(r["curve"]) == 3, r
print(f"ok: pruning: {len(pruned)} of {len(trained)} trainings stopped early, {spent} epochs spent")
PY

# A full disk (a small tmpfs) in the middle of the search: rank 0 or a group's first rank hits the
# error writing the trial log, a search snapshot or a trial's checkpoint, and the job stops with
# exit code 3 and the reason, not a failed trial and a hang.
mkdir -p "$work/disk"
if mount -t tmpfs -o size=36k tmpfs "$work/disk" 2>mount.err; then
  trap 'umount "$work/disk" 2>/dev/null; rm -rf "$work"' EXIT
  sed -e "s|dir: $work/fashion\$|dir: $work/disk/full|" -e 's/population: 4/population: 8/' fashion.yaml > full_disk.yaml
  grep -q "dir: $work/disk/full" full_disk.yaml || { echo "FAIL: full_disk.yaml has no output dir"; fails=$((fails + 1)); }
  expect_exit 3 'data error: .*(No space left on device|disk full)' -- timeout 120 "$MPIEXEC" -n 4 "$STRATA" run full_disk.yaml
  umount "$work/disk"
else
  echo "FAIL: cannot mount a small tmpfs for the full-disk search ($(cat mount.err)); it needs root"
  fails=$((fails + 1))
fi

# best.yaml is a plain config that runs as it is, and predict on the best weights gives the best
# trial's test accuracy.
best_test=$("$PYTHON3" -c 'import json,sys; d=sys.argv[1]; b=json.load(open(d+"/hpo_summary.json"))["best"]["trial"]; print(repr([json.loads(l) for l in open(d+"/trials.jsonl") if json.loads(l)["trial"] == b][0]["test_accuracy"]))' "$work/fashion")
expect_exit 0 "test accuracy $best_test " -- "$STRATA" predict "$work/fashion/best.yaml" "$work/fashion/best_weights.h5"
grep -q '^stages' "$work/fashion/best.yaml" && { echo "FAIL: best.yaml still has a stages section"; fails=$((fails + 1)); }
expect_exit 0 'epoch 1/1\] train loss' -- "$STRATA" run "$work/fashion/best.yaml"

"$PYTHON3" - "$work" <<'PY' || fails=$((fails + 1))
import csv, json, sys
work = sys.argv[1]
for name, dims in (("function", 10), ("fashion", 7), ("fashion_d2", 7), ("fashion_timeout", 7),
                   ("fashion_m2", 2)):
    rows = list(csv.DictReader(open(f"{work}/{name}/trials.csv")))
    lines = [json.loads(l) for l in open(f"{work}/{name}/trials.jsonl")]
    summary = json.load(open(f"{work}/{name}/hpo_summary.json"))
    # A row per trial: trainings, and repeated genomes that took an earlier result (cached).
    cached = [r for r in rows if r["status"] == "cached"]
    assert len(rows) == len(lines) == summary["trainings"] + summary["cached"] and len(cached) == summary["cached"], \
        (name, len(rows), len(lines), summary["trainings"], summary["cached"])
    for r in cached:
        original = next(o for o in rows if o["trial"] == r["reason"].split()[2].rstrip(","))
        assert r["fitness"] == original["fitness"], (name, r, original)
    assert sorted(int(r["trial"]) for r in rows) == list(range(len(rows))), f"{name}: trial ids are not 0..n-1"
    assert len(rows[0]) == 4 + dims + 9, f"{name}: columns {list(rows[0])}"
    if name == "fashion_timeout":
        assert all(r["status"] == "timeout" and r["reason"].startswith("stopped in epoch 1 of 1 after")
                   and r["reason"].endswith("over trial_timeout_s 1e-06") for r in rows), rows[0]
        assert summary["best"] is None and summary["stop_reason"] == "generations"
        print(f"ok: {name}: {len(rows)} trials, every one a timeout")
        continue
    assert summary["best"] is not None and len(summary["best"]["params"]) == dims
    groups = {r["member_group"] for r in rows if r["status"] != "cached"}
    assert groups == {"0"} if name == "fashion_m2" else len(groups) > 1, f"{name}: member groups {groups}"
    failed = [r for r in rows if r["status"] == "failed"]
    if name == "function":
        # Rastrigin is minimised by default; random points in 10 dims score well above 100.
        assert summary["direction"] == "minimize" and summary["best"]["fitness"] < 100, summary["best"]["fitness"]
    if name == "fashion_d2":
        # Every trial's global batch is K x D x its local batch = the bound, whatever the local batch.
        assert {r["global_batch"] for r in rows if r["status"] != "cached"} == {"128"}, {r["global_batch"] for r in rows}
        assert len({r["batch"] for r in rows}) > 1, "the search never varied the local batch"
    if name == "fashion_m2":
        trained = [r for r in rows if r["status"] != "cached"]
        assert all(r["status"] == "ok" for r in trained), [r["reason"] for r in rows]
        assert {r["global_batch"] for r in trained} == {"64"}
    if name == "fashion":
        assert failed and all(r["reason"].startswith("training diverged") for r in failed), "no diverged trial recorded"
        assert len(failed) < len(rows), "every trial failed"
        ok = [float(r["fitness"]) for r in rows if r["status"] == "ok"]
        assert max(ok) == summary["best"]["fitness"]
        # Usable results: parameters as JSON numbers, a validation curve per trial, the best
        # trial's weights kept (keep_top 1) and a best.yaml.
        assert all(isinstance(l["params"]["lr"], float) and isinstance(l["params"]["units1"], int)
                   and isinstance(l["params"]["batch"], int) for l in lines), lines[0]["params"]
        for l in lines:
            if l["status"] != "ok":
                continue
            curve = [json.loads(c) for c in open(f"{work}/{name}/trials/{l['trial']}/metrics.jsonl")]
            assert [c["epoch"] for c in curve] == [1] and curve[0]["val_accuracy"] == l["val_accuracy"], (l["trial"], curve)
        import os
        kept = [t for t in range(len(rows)) if os.path.exists(f"{work}/{name}/trials/{t}/weights.h5")]
        assert kept == [summary["best"]["trial"]], (kept, summary["best"]["trial"])
        assert summary["best"]["config"] == "best.yaml" and summary["top"][0]["trial"] == kept[0]
        artifacts = json.load(open(f"{work}/{name}/artifacts.json"))
        assert artifacts["hpo.best"] == summary["best"] and artifacts["hpo.top_k"] == summary["top"], artifacts
    print(f"ok: {name}: {len(rows)} trials, {len(failed)} failed, best {summary['best']['fitness']:.4g}, "
          f"groups {sorted({r['member_group'] for r in rows})}")
PY
finish
