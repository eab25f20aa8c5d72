#!/usr/bin/env bash
# Trainings to reach a target validation accuracy on Fashion-MNIST: the genetic search of
# configs/fashion_hpo.yaml (generational and asynchronous) against random search and Optuna's
# default TPE sampler (tests/bench/optuna_fashion.py, when /usr/bin/python3 has Optuna: jobs/
# install_deps.sh --with-optuna) over the same space, with the same budget (max_trainings) and the
# same run seeds; strata's searches run on RANKS member groups. The searches run their whole budget
# (the config's `target` is removed), and for each of TARGETS the script reads from trials.csv the
# trainings up to the first one that reached it (in the order the search read results: trial
# order for the generational and random searches, end order for the others), and the wall time
# at which one first did. Pruning is measured on the same search with 3-epoch trainings, without
# it and with the median and ASHA rules after epoch 1: trainings and epochs to each target.
# Population-based training (kind pbt) runs configs/fashion_pbt.yaml, a small CNN, with 8 members
# for 10 epochs (the same 80 epochs); its "trainings" are member-rounds of one epoch, and a target
# counts as reached at the end of the first round in which a member reached it. Kind random5x is
# random search with 5 times the budget, so that its median is a number where random search
# reaches a target in fewer than half the seeds within the budget. For both random kinds a last
# table pools every training of every seed: random search's trainings are independent draws, so
# its trainings to a target follow a geometric law, whose median (with a 95% interval) the pooled
# share that reached the target gives far more tightly than a median over a few seeds. Kinds genetic9,
# median9 and asha9 measure pruning on 9-epoch trainings (rungs after epochs 1, 3 and 9). Its baseline
# (kind cnn_random) is random search over the same CNN and space: 8 trainings of 10 epochs. Kind
# tpe_multivariate is strata's TPE with `multivariate: true` (not in the default kinds). Kind gp is
# strata's default search, Gaussian-process Bayesian optimisation (`algorithm: gp`). STARTUP_TRIALS=N
# in the environment gives the TPE and GP kinds N random startup trials instead of their 10 and 7.
#
#   tests/bench/run_hpo_fashion_bench.sh [BUILD_DIR] [SEEDS] [RANKS] [TARGETS] [KINDS]
#   defaults: build/, "1 2 3 4 5 6 7 8 9 10", 2, "0.825 0.83 0.835",
#   "genetic asynchronous surrogate gp tpe random random5x optuna genetic3 median3 asha3 pbt cnn_random"
# BUILD_DIR is a build tree (strata is built first) or a directory that holds a strata binary.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="${1:-${STRATA_BUILD_DIR:-$root/build}}"
seeds="${2:-1 2 3 4 5 6 7 8 9 10}"
ranks="${3:-2}"
targets="${4:-0.825 0.83 0.835}"
kinds="${5:-genetic asynchronous surrogate gp tpe random random5x optuna genetic3 median3 asha3 pbt cnn_random}"
config="$root/configs/fashion_hpo.yaml"
data="$root/data/fashion_mnist.h5"
[ -f "$data" ] || { echo "run_hpo_fashion_bench.sh: $data is missing; run jobs/setup.sh first" >&2; exit 1; }
if [ -f "$build/CMakeCache.txt" ]; then cmake --build "$build" --target strata -j "$(nproc)" >&2; fi
if [ -f "$root/jobs/env.sh" ]; then
  # shellcheck source=../../jobs/env.sh
  . "$root/jobs/env.sh"
fi
mpiexec="$(command -v mpiexec.mpich || command -v mpiexec)"
work="$(mktemp -d)"
# The runs stay for a look when the script fails.
trap 'rc=$?; if [ $rc = 0 ]; then rm -rf "$work"; else echo "run_hpo_fashion_bench.sh: the runs are kept in $work" >&2; fi' EXIT

budget="$(sed -n 's/^ *max_trainings: *\([0-9]*\).*/\1/p' "$config")"
grep -q 'algorithm: genetic' "$config" && grep -q '^  seed: 1$' "$config" && [ -n "$budget" ] ||
  { echo "run_hpo_fashion_bench.sh: $config no longer has the lines this script edits" >&2; exit 1; }

if [[ " $kinds " == *" optuna "* ]] && ! /usr/bin/python3 -c 'import optuna' 2>/dev/null; then
  kinds="${kinds/optuna/}"
  echo "run_hpo_fashion_bench.sh: no Optuna for /usr/bin/python3 (jobs/install_deps.sh --with-optuna): its rows are left out" >&2
fi
for seed in $seeds; do
  for kind in $kinds; do
    cfg="$work/$kind-$seed.yaml"
    # Generations enough that the budget (max_trainings) ends every genetic search: copies of a
    # genome already evaluated are not trainings.
    sed -e "s|^  seed: 1$|  seed: $seed|" -e "s|path: \.\./data/|path: $root/data/|" \
        -e "s|dir: runs/fashion_hpo|dir: $work/$kind-$seed|" -e '/^ *target: /d' \
        -e 's/^\( *\)generations: [0-9]*$/\1generations: 60/' "$config" > "$cfg"
    # Random search: the same space and budget, without the genetic settings (strata rejects them).
    [ "$kind" = random ] && sed -i -e "s/algorithm: genetic/algorithm: random\n      trials: $budget/" \
      -e '/^ *\(population\|generations\|elites\|tournament\|max_trainings\): /d' "$cfg"
    # Random search with five times the budget: its median trainings to a target it reaches in
    # fewer than half the seeds within the budget, measured instead of "more than the budget".
    [ "$kind" = random5x ] && sed -i -e "s/algorithm: genetic/algorithm: random\n      trials: $((5 * budget))/" \
      -e '/^ *\(population\|generations\|elites\|tournament\|max_trainings\): /d' "$cfg"
    [ "$kind" = asynchronous ] && sed -i -e 's/algorithm: genetic/algorithm: genetic\n      schedule: asynchronous/' "$cfg"
    [ "$kind" = surrogate ] && sed -i -e 's/algorithm: genetic/algorithm: genetic\n      surrogate_candidates: 8/' "$cfg"
    # strata's TPE and GP searches: the same space and budget, without the genetic settings.
    case "$kind" in tpe | tpe_multivariate | gp)
      algorithm=tpe; [ "$kind" = gp ] && algorithm=gp
      joint=""; [ "$kind" = tpe_multivariate ] && joint="\n      multivariate: true"
      [ -n "${STARTUP_TRIALS:-}" ] && joint="$joint\n      startup_trials: $STARTUP_TRIALS"
      sed -i -e "s/algorithm: genetic/algorithm: $algorithm\n      trials: $budget$joint/" \
        -e '/^ *\(population\|generations\|elites\|tournament\|max_trainings\): /d' "$cfg" ;;
    esac
    # Pruning needs epochs to stop early: 3-epoch trainings, the rule after the first.
    case "$kind" in *3) sed -i -e 's/^  epochs: 1$/  epochs: 3/' "$cfg" ;; *9) sed -i -e 's/^  epochs: 1$/  epochs: 9/' "$cfg" ;; esac
    [ "$kind" = median9 ] && sed -i -e 's/algorithm: genetic/algorithm: genetic\n      prune: {rule: median, after_epochs: 1}/' "$cfg"
    [ "$kind" = asha9 ] && sed -i -e 's/algorithm: genetic/algorithm: genetic\n      prune: {rule: asha, after_epochs: 1}/' "$cfg"
    [ "$kind" = median3 ] && sed -i -e 's/algorithm: genetic/algorithm: genetic\n      prune: {rule: median, after_epochs: 1}/' "$cfg"
    [ "$kind" = asha3 ] && sed -i -e 's/algorithm: genetic/algorithm: genetic\n      prune: {rule: asha, after_epochs: 1}/' "$cfg"
    if [ "$kind" = pbt ] || [ "$kind" = cnn_random ]; then
      sed -e "s|^  seed: 1$|  seed: $seed|" -e "s|path: \.\./data/|path: $root/data/|" \
          -e "s|dir: runs/fashion_pbt|dir: $work/$kind-$seed|" -e 's/^  epochs: 4$/  epochs: 10/' \
          "$root/configs/fashion_pbt.yaml" > "$cfg"
      grep -q '^  epochs: 10$' "$cfg" && grep -q 'population: 8' "$cfg" ||
        { echo "run_hpo_fashion_bench.sh: configs/fashion_pbt.yaml no longer has the lines this script edits" >&2; exit 1; }
      [ "$kind" = cnn_random ] && sed -i -e 's/algorithm: pbt/algorithm: random\n      trials: 8/' \
        -e '/^ *\(population\|interval\|quantile\|resample_probability\): /d' "$cfg"
    fi
    echo "seed $seed, $kind search ..." >&2
    if [ "$kind" = optuna ]; then
      /usr/bin/python3 "$root/tests/bench/optuna_fashion.py" "$build/strata" "$cfg" "$seed" "$budget" "$work/$kind-$seed" \
        > "$work/$kind-$seed.log" 2>&1 || { cat "$work/$kind-$seed.log" >&2; exit 1; }
    else
      "$mpiexec" -n "$ranks" "$build/strata" run "$cfg" > "$work/$kind-$seed.log" 2>&1 ||
        { cat "$work/$kind-$seed.log" >&2; exit 1; }
    fi
  done
done

/usr/bin/python3 - "$work" "$budget" "$ranks" "$seeds" "$targets" "$kinds" <<'PY'
import csv, json, math, os, statistics, sys
work, budget, ranks = sys.argv[1], int(sys.argv[2]), sys.argv[3]
seeds, targets = sys.argv[4].split(), [float(t) for t in sys.argv[5].split()]
names = {"genetic": "GA (generational)", "asynchronous": "GA (asynchronous)",
         "surrogate": "GA with TPE surrogate (8 candidates)", "tpe": "strata TPE",
         "tpe_multivariate": "strata TPE, multivariate",
         "gp": "strata GP (Bayesian optimisation)",
         "random": "random", "random5x": f"random, {5 * budget} trainings", "optuna": "Optuna 3.1 TPE (sequential)",
         "genetic3": "GA, 3 epochs", "median3": "GA, 3 epochs, median pruning",
         "asha3": "GA, 3 epochs, ASHA pruning",
         "genetic9": "GA, 9 epochs", "median9": "GA, 9 epochs, median pruning",
         "asha9": "GA, 9 epochs, ASHA pruning",
         "pbt": "PBT, CNN, 8 members x 10 epochs",
         "cnn_random": "random, CNN, 8 trainings x 10 epochs"}
kinds = [(k, names[k]) for k in sys.argv[6].split()]
print(f"Fashion-MNIST, configs/fashion_hpo.yaml without its target: {budget} trainings per search, "
      f"strata's searches on {ranks} member groups of one rank, Optuna one training at a time; "
      f"seeds {' '.join(seeds)}"
      + (f"; TPE and GP with {os.environ['STARTUP_TRIALS']} startup trials"
         if os.environ.get("STARTUP_TRIALS") else "") + ".\n")
result = {}  # (kind, seed) -> rows, wall, best
short = []  # searches that stopped before the budget
def pbt_rounds(kind, seed):
    """PBT's rows as one row per round: the round's best member, its trainings (member-rounds) and
    epochs so far."""
    rows = list(csv.DictReader(open(f"{work}/{kind}-{seed}/pbt.csv")))
    rounds = {}
    for r in rows:
        rounds.setdefault(int(r["round"]), []).append(r)
    out = []
    for n in sorted(rounds):
        members = rounds[n]
        fits = [float(m["fitness"]) for m in members if m["fitness"]]
        out.append({"status": "ok" if fits else "failed", "fitness": max(fits) if fits else "nan",
                    "members": len(members), "epochs": int(members[0]["epochs"]),
                    "ended_s": "nan"})
    return out


def budget_of(kind):
    return {"cnn_random": 8, "random5x": 5 * budget}.get(kind, budget)


for kind, _ in kinds:
    for seed in seeds:
        if kind == "pbt":
            summary = json.load(open(f"{work}/{kind}-{seed}/hpo_summary.json"))
            result[kind, seed] = (pbt_rounds(kind, seed), summary["wall_seconds"],
                                  summary["best"]["fitness"])
            continue
        # Repeated genomes (status cached) took an earlier result: rows, but no trainings.
        rows = [r for r in csv.DictReader(open(f"{work}/{kind}-{seed}/trials.csv"))
                if r["status"] != "cached"]
        summary = json.load(open(f"{work}/{kind}-{seed}/hpo_summary.json"))
        # A genetic search may stop on its generations first when many children copy a genome
        # already evaluated; the table says so.
        assert len(rows) == summary["trainings"] <= budget_of(kind), (kind, seed, len(rows))
        if len(rows) < budget_of(kind) and kind != "cnn_random":
            short.append(f"{kind} seed {seed}: {len(rows)} trainings")
        # The generational and random searches read results in trial order, whatever order they
        # came in; the asynchronous one and Optuna in the order they ended (trials.csv's).
        if kind in ("genetic", "surrogate", "random", "random5x", "cnn_random"):
            rows.sort(key=lambda r: int(r["trial"]))
        result[kind, seed] = (rows, summary["wall_seconds"], summary["best"]["fitness"])

def epochs_of(row):
    # Optuna's rows have no epochs (the config's one); a training that failed in its first epoch
    # spent part of it.
    return max(int(row.get("epochs") or 1), 1)


def reached(rows, target):
    """Trainings and epochs up to the first training (in the order the search read them) that
    reached target (a pruned one by its partial fitness), and when one first did."""
    def hit(r):
        return r["status"] in ("ok", "pruned") and float(r["fitness"]) >= target
    if rows and "members" in rows[0]:  # pbt: every member trained each round
        for n, r in enumerate(rows, 1):
            if hit(r):
                return n * r["members"], r["epochs"] * r["members"], None
        return None, None, None
    for n, r in enumerate(rows, 1):
        if hit(r):
            return (n, sum(epochs_of(x) for x in rows[:n]),
                    min(float(h["ended_s"]) for h in rows if hit(h)))
    return None, None, None


def median_or_miss(values, hits, fmt, miss):
    # A median is a number only when most seeds reached the target: with half of them missing
    # it, it would average a hit with "more than the budget".
    if hits > len(seeds) / 2:
        return fmt(statistics.median(values))
    return miss if hits < len(seeds) / 2 else "-"


print("| target | search | reached in | median trainings to target | median epochs to target | "
      "median wall s to target |")
print("| --- | --- | --- | --- | --- | --- |")
for target in targets:
    for kind, name in kinds:
        runs, epochs, walls, hits = [], [], [], 0
        for seed in seeds:
            rows, wall, _ = result[kind, seed]
            n, e, t = reached(rows, target)
            hits += n is not None
            # A miss: more than the budget (cnn_random's is its 8 trainings).
            runs.append(n if n is not None else budget_of(kind) + 1)
            epochs.append(e if e is not None else float("inf"))
            walls.append(t if t is not None else float("inf"))
        print(f"| {target} | {name} | {hits} of {len(seeds)} seeds | "
              f"{median_or_miss(runs, hits, lambda v: f'{v:g}', f'> {budget_of(kind)}')} | "
              f"{median_or_miss(epochs, hits, lambda v: f'{v:g}', '-')} | "
              # pbt.csv has no end times
              f"{'-' if kind == 'pbt' else median_or_miss(walls, hits, lambda v: f'{v:.1f}', '-')} |")
print()
print("| search | median best val_accuracy | mean epochs of the whole search | mean wall s of the whole search |")
print("| --- | --- | --- | --- |")
def search_epochs(kind, seed):
    rows = result[kind, seed][0]
    if kind == "pbt":
        return rows[-1]["epochs"] * rows[-1]["members"]
    return sum(epochs_of(r) for r in rows)


for kind, name in kinds:
    print(f"| {name} | {statistics.median(result[kind, s][2] for s in seeds):.4f} | "
          f"{statistics.mean(search_epochs(kind, s) for s in seeds):.0f} | "
          f"{statistics.mean(result[kind, s][1] for s in seeds):.1f} |")

# Random search's trainings are independent draws, so its trainings to a target follow a
# geometric law: the share of all its trainings (every seed pooled) that reached the target gives
# that law's median with a much narrower spread than a median over a few censored seeds.
def geometric_median(p):
    return math.inf if p <= 0 else max(1, math.ceil(math.log(0.5) / math.log1p(-p)))


def wilson(hits, n, z=1.96):
    centre = (hits + z * z / 2) / (n + z * z)
    half = z * math.sqrt(hits * (n - hits) / n + z * z / 4) / (n + z * z)
    return max(centre - half, 0.0), centre + half


pooled = [(kind, name) for kind, name in kinds if kind in ("random", "random5x")]
if pooled:
    print("\n| target | search | trainings pooled | reached the target | median trainings to target "
          "(geometric law, 95% interval) |")
    print("| --- | --- | --- | --- | --- |")
for target in targets:
    for kind, name in pooled:
        rows = [r for seed in seeds for r in result[kind, seed][0]]
        hits = sum(r["status"] == "ok" and float(r["fitness"]) >= target for r in rows)
        low, high = wilson(hits, len(rows))
        print(f"| {target} | {name} | {len(rows)} | {hits} ({100 * hits / len(rows):.2f}%) | "
              f"{geometric_median(hits / len(rows)):g} ({geometric_median(high):g}-"
              f"{geometric_median(low):g}) |")

# Where in a search its hits come: the share of trainings that reached the first target, by their
# place in the order the search read them (a model-based search's first trainings are its startup
# draws; the rest show how soon its model finds the target's region).
windows = [(1, 10), (11, 20), (21, 30), (31, 50), (51, budget)]
print(f"\nThe share of trainings that reached {targets[0]}, by their place in the order the search "
      "read them:\n")
print("| search | " + " | ".join(f"trainings {lo}-{hi}" for lo, hi in windows) + " |")
print("| --- |" + " --- |" * len(windows))
for kind, name in kinds:
    if kind in ("pbt", "cnn_random"):
        continue
    shares = []
    for lo, hi in windows:
        placed = [r for seed in seeds for r in result[kind, seed][0][lo - 1:hi]]
        hit = sum(r["status"] in ("ok", "pruned") and float(r["fitness"]) >= targets[0]
                  for r in placed)
        shares.append(f"{100 * hit / len(placed):.0f}%" if placed else "-")
    print(f"| {name} | " + " | ".join(shares) + " |")
if short:
    print("\nStopped on their generations before the budget: " + "; ".join(short))
PY
