#!/usr/bin/env bash
# The workflow results table of the README, on Fashion-MNIST: the best single model of a genetic
# search; an ensemble of its top 4 by each combiner; hierarchical against flat; few-sample
# transfer against training from scratch for n = 5, 20 and 100 samples per class. Each row with
# test accuracy, wall time, ranks and decomposition.
#   tests/bench/run_workflow_bench.sh [RANKS] [BUILD_DIR]
# Goals printed at the end: the ensemble beats its best member by >= 0.5 points; few-sample
# transfer beats scratch at n = 20 by >= 10 points. The configs are tests/bench/workflow/*.yaml.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
ranks="${1:-2}"
build="${2:-${STRATA_BUILD_DIR:-$root/build}}"
cd "$root"
source jobs/env.sh
mpiexec="$(command -v mpiexec.mpich || command -v mpiexec)"
out=runs/bench_workflow
mkdir -p "$out"
for name in ensemble hierarchy few_sample; do
  echo "== $mpiexec -n $ranks $build/strata run tests/bench/workflow/$name.yaml --fresh" >&2
  "$mpiexec" -n "$ranks" "$build/strata" run "tests/bench/workflow/$name.yaml" --fresh > "$out/$name.log" 2>&1 ||
    { tail -20 "$out/$name.log" >&2; exit 1; }
done
/usr/bin/python3 - "$out" "$ranks" <<'PY'
import json, re, sys
out, ranks = sys.argv[1], sys.argv[2]
def log(name): return open(f"{out}/{name}.log").read()
def stages(name):
    """stage name -> (seconds, "G x D x M")"""
    text, found = log(name), {}
    layout = dict(re.findall(r"\[run\] stage \d+/\d+: (\S+) on G = (\d+ x D = \d+ x M = \d+)", text))
    for stage, seconds in re.findall(r"\[run\] stage \d+/\d+ \((\S+)\) done in ([\d.]+)s", text):
        found[stage] = (float(seconds), "G " + layout.get(stage, "?").replace("D = ", "D ").replace("M = ", "M "))
    return found
def j(path): return json.load(open(f"{out}/{path}"))
rows = []
e, es = j("ensemble/ensemble_report.json"), stages("ensemble")
summary = j("ensemble/hpo_summary.json")
best = summary["best"]
trial = [json.loads(l) for l in open(f"{out}/ensemble/trials.jsonl") if json.loads(l)["trial"] == best["trial"]][0]
rows.append(("best single model of the search (trial %d, 1 epoch)" % best["trial"], trial["test_accuracy"], *es["hpo"],
             f"{summary['trainings']} trainings"))
bm = e["best_member"]
rows.append(("best member of the ensemble (retrained 6 epochs)", bm["test_accuracy"], *es["ensemble"], f"member {bm['member']}"))
for name, c in e["combiners"].items():
    rows.append((f"ensemble of the top 4, {name}", c["test_accuracy"], *es["ensemble"],
                 f"{c['gain_over_best_member_points']:+.2f} points over the best member"))
h, hs = j("hierarchy/hierarchy_report.json"), stages("hierarchy")
hs = hs.get("transfer") or next(iter(hs.values()), (float("nan"), "?"))
rows.append(("hierarchical (coarse + 3 sub-classifiers)", h["hierarchical"]["test_accuracy"], *hs,
             f"{h['hierarchical']['parameters']} parameters; {h['gain_over_flat_points']:+.2f} points over flat"))
rows.append(("flat, same parameter count", h["flat"]["test_accuracy"], *hs, f"{h['flat']['parameters']} parameters"))
fs = stages("few_sample")
for stage, n in (("transfer", 5), ("transfer2", 20), ("transfer3", 100)):
    t = j(f"few_sample/{'' if stage == 'transfer' else stage + '/'}transfer_report.json")
    rows.append((f"few-sample n={n}: fine-tuned from classes 0-4", t["fine_tuned"]["test_accuracy"], *fs[stage],
                 f"{t['gain_over_scratch_points']:+.2f} points over scratch"))
    rows.append((f"few-sample n={n}: from scratch", t["scratch"]["test_accuracy"], *fs[stage], f"{t['training_samples']} samples"))
print(f"| result | test accuracy | wall time of its stage | ranks | decomposition | note |")
print(f"| --- | --- | --- | --- | --- | --- |")
for name, acc, seconds, layout, note in rows:
    print(f"| {name} | {acc:.4f} | {seconds:.1f} s | {ranks} | {layout} | {note} |")
gain = max(c["gain_over_best_member_points"] for c in e["combiners"].values())
t20 = j("few_sample/transfer2/transfer_report.json")["gain_over_scratch_points"]
print()
print(f"goal: ensemble beats its best member by >= 0.5 points: best combiner {gain:+.2f}: {'met' if gain >= 0.5 else 'MISSED'}")
print(f"goal: few-sample transfer beats scratch at n=20 by >= 10 points: {t20:+.2f}: {'met' if t20 >= 10 else 'MISSED'}")
PY
