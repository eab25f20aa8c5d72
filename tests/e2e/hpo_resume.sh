#!/usr/bin/env bash
# A search resumes where it stopped, on any number of ranks: killed with SIGKILL mid-generation on 4
# ranks and resumed on 2, or stopped by the requeue signal (exit 75 through mpiexec, trials in
# flight checkpointed) and resumed on 3, it gives the trials of an uninterrupted run: the same ids,
# generations, hyperparameters and fitnesses, and the same best. The steady-state searches (the
# asynchronous genetic schedule and the default, Gaussian-process search), killed on 4 ranks,
# resume on 2 from their journals in the order results came in.
STRATA="$1"
source "$(dirname "$0")/lib.sh"
MPIEXEC="$(command -v mpiexec.mpich || command -v mpiexec)"
root="$PWD"
cd "$work"

# A genetic search of 3 generations of 8 on one-rank groups; trials checkpoint every 10 steps.
sed -e "s|path: \.\./data/|path: $root/data/|" -e "s|dir: runs/fashion_hpo|dir: out|" \
    -e 's/generations: 9/generations: 3/' -e 's/population: 10/population: 8/' \
    -e '/target: /d' -e '/max_trainings: /d' -e 's/progress_seconds: 10/progress_seconds: 100/' \
    -e 's/train_subset: 20000/train_subset: 6000/' -e 's/test_subset: 2000/test_subset: 500/' \
    -e 's/batch: {choice: \[16, 32, 64, 128, 256, 512\]}/batch: {choice: [16, 32]}/' \
    "$root/configs/fashion_hpo.yaml" > search.yaml
printf 'checkpoint: {every_steps: 10}\n' >> search.yaml
grep -q 'generations: 3' search.yaml && grep -q 'choice: \[16, 32\]' search.yaml ||
  { echo "FAIL: configs/fashion_hpo.yaml no longer matches this test's edits"; exit 1; }
sed 's/dir: out/dir: ref/' search.yaml > ref.yaml
expect_exit 0 '\[hpo\] [0-9]+ trainings( \([0-9]+ repeated genomes took an earlier result\))?, [0-9]+ epochs in .*stopped: generations' -- "$MPIEXEC" -n 4 "$STRATA" run ref.yaml
expect_gpu_training ref

best_of() { "$PYTHON3" -c 'import json,sys; b=json.load(open(sys.argv[1]))["best"]; print(b["trial"], b["fitness"], b["params"])' "$1/hpo_summary.json"; }
trials_without_timing ref > ref.txt
best_of ref > ref_best.txt
[ "$(wc -l < ref.txt)" = 22 ] || { echo "FAIL: the reference search has $(wc -l < ref.txt) trials"; exit 1; }
same_search() {  # $1: what was done
  if diff -q ref.txt <(trials_without_timing out) >/dev/null && diff -q ref_best.txt <(best_of out) >/dev/null; then
    echo "ok: $1: the same 22 trials and best as the uninterrupted search"
  else
    echo "FAIL: $1: the trials differ from the uninterrupted search"; diff ref.txt <(trials_without_timing out) | head -6
    fails=$((fails + 1))
  fi
}
rows() { [ -f out/trials.csv ] && echo $(( $(wc -l < out/trials.csv) - 1 )) || echo 0; }

# SIGKILL on 4 ranks once generation 1 has begun (10 results in), resumed on 2 ranks.
("$MPIEXEC" -n 4 "$STRATA" run search.yaml > killed.log 2>&1) 2>/dev/null &
for _ in $(seq 600); do [ "$(rows)" -ge 10 ] && break; sleep 0.05; done
pkill -KILL -f "strata run search.yaml"
wait
echo "killed after $(rows) results"
[ "$(rows)" -lt 22 ] || { echo "FAIL: the search ended before it was killed"; fails=$((fails + 1)); }
expect_exit 0 '\[resume\] hpo: [0-9]+ trials replayed from the journal' -- "$MPIEXEC" -n 2 "$STRATA" run search.yaml
same_search "killed on 4 ranks, resumed on 2"

# signal_mid_search SIGNAL RESULTS [ranks]: a fresh search on 4 ranks, SIGNAL sent once RESULTS
# trials have ended, to mpiexec (which passes it on, as strata_step.sh does for sbatch's signal) or
# with "ranks" to every rank (as slurmstepd sends SIGTERM to a step's tasks at its time limit);
# every group checkpoints its trial and mpiexec must exit 75.
signal_mid_search() {
  rm -rf out
  # Every rank exits 75 on its own; without -disable-auto-cleanup Hydra kills the ranks still
  # finalizing MPI once the first one has exited non-zero, and under load reports their death.
  "$MPIEXEC" -disable-auto-cleanup -n 4 "$STRATA" run search.yaml > signalled.log 2>&1 &
  local launcher=$! rc
  for _ in $(seq 600); do [ "$(rows)" -ge "$2" ] && break; sleep 0.05; done
  if [ "${3:-}" = ranks ]; then
    # The ranks are the children of Hydra's proxies, mpiexec's children. Hydra itself, sent
    # SIGTERM, reported exit 0 once in a few runs though every rank exited 75.
    pkill -"$1" -P "$(pgrep -d, -P "$launcher")"
  else
    kill -"$1" "$launcher"
  fi
  # With -disable-auto-cleanup a rank that dies leaves the others waiting for it: give up on the
  # launcher after 120 s instead of hanging until the test's timeout.
  (sleep 120 && kill -KILL "$launcher" 2> /dev/null) &
  local reaper=$!
  wait "$launcher"
  rc=$?
  kill "$reaper" 2> /dev/null
  if [ "$rc" = 75 ] && grep -q 'the search stopped on a signal.*exit 75' signalled.log; then
    echo "ok: SIG$1: mpiexec exited 75 after $(rows) results"
  else
    echo "FAIL: after SIG$1 mpiexec exited $rc, expected 75"; tail -3 signalled.log; fails=$((fails + 1))
  fi
}

# The requeue signal mid-search, resumed on 3 ranks: the trials in flight go on from their own
# checkpoints.
signal_mid_search USR1 6
expect_exit 0 '\[resume\] hpo: [0-9]+ trials replayed' -- "$MPIEXEC" -n 3 "$STRATA" run search.yaml
same_search "stopped by the signal on 4 ranks, resumed on 3"

# SIGTERM (what Slurm sends to every task before SIGKILL, and on preemption): the same.
signal_mid_search TERM 3 ranks
expect_exit 0 'done' -- "$MPIEXEC" -n 4 "$STRATA" run search.yaml
same_search "stopped by SIGTERM, resumed"

# The signal to one rank alone, at step 40 of its trial: its group checkpoints the trial, the
# coordinator stops the others as they ask, every rank exits 75, and the trial resumes from its
# checkpoint (here on 2 ranks).
rm -rf out
STRATA_FAULT=stop_at_step=40 expect_exit 75 'the search stopped on a signal.*exit 75' -- "$MPIEXEC" -n 4 "$STRATA" run search.yaml
expect_exit 0 '\[resume\] trial [0-9]+: from .*trial[0-9]+/ckpt-[0-9]+.h5: epoch 1/1 step 4[01]/' -- "$MPIEXEC" -n 2 "$STRATA" run search.yaml
same_search "one rank signalled mid-trial, resumed on 2"

# The steady-state searches: what they propose depends on the order results came in. Killed on 4
# ranks, each resumes on 2 by replaying its journal in that order; the resume checks every kept row
# against the trial the replay makes (and fails on a mismatch), keeps the killed run's rows as they
# were, and the search then spends its whole budget with each trial run once.
# killed_and_resumed NAME TRIALS KILL_AFTER: NAME.yaml writes to $work/NAME.
killed_and_resumed() {
  local name="$1" trials="$2" kill_after="$3"
  name_rows() { [ -f "$name/trials.csv" ] && echo $(( $(wc -l < "$name/trials.csv") - 1 )) || echo 0; }
  ("$MPIEXEC" -n 4 "$STRATA" run "$name.yaml" > "${name}_killed.log" 2>&1) 2>/dev/null &
  for _ in $(seq 600); do [ "$(name_rows)" -ge "$kill_after" ] && break; sleep 0.02; done
  pkill -KILL -f "strata run $name.yaml"
  wait
  kept="$(name_rows)"
  cp "$name/trials.csv" "${name}_killed.csv"
  cp -r "$name" "${name}_killed"
  echo "$name search killed after $kept rows"
  [ "$kept" -ge "$kill_after" ] && [ "$kept" -lt "$trials" ] || { echo "FAIL: the $name search was not killed mid-way"; fails=$((fails + 1)); }
  expect_exit 0 '\[resume\] hpo: [0-9]+ trials replayed from the journal' -- "$MPIEXEC" -n 2 "$STRATA" run "$name.yaml"
  if [ "$(head -n $((kept + 1)) "$name/trials.csv")" = "$(cat "${name}_killed.csv")" ] &&
     "$PYTHON3" - "$name/trials.csv" "$trials" <<'PY'
import csv, sys
ids = [int(r["trial"]) for r in csv.DictReader(open(sys.argv[1]))]
n = int(sys.argv[2])
assert sorted(ids) == list(range(n)), (len(ids), sorted(set(range(n)) - set(ids)))
PY
  then
    echo "ok: $name: the killed run's $kept rows kept, $trials trials each once after the resume"
  else
    echo "FAIL: $name: the resumed journal does not continue the killed one"; fails=$((fails + 1))
  fi
}
cat > async.yaml <<YAML
run: {name: steady, seed: 5}
model: {objective: rastrigin, dims: 6, eval_seconds: 0.04, eval_stddev_seconds: 0.03}
stages:
  - hpo: {algorithm: genetic, population: 12, generations: 8, elites: 1, schedule: asynchronous}
output: {dir: $work/async}
YAML
# 12 + 7 x 11 = 89 trials.
killed_and_resumed async 89 30
# The default search (Gaussian-process Bayesian optimisation), 50 trials.
cat > default.yaml <<YAML
run: {name: default_search, seed: 5}
model: {objective: rastrigin, dims: 6, eval_seconds: 0.04, eval_stddev_seconds: 0.03}
stages:
  - hpo: {trials: 50}
output: {dir: $work/default}
YAML
killed_and_resumed default 50 20
grep -q '^\[hpo\] gp search' default_killed.log || { echo "FAIL: the default search is not the GP search"; fails=$((fails + 1)); }
# The killed journal with two rows swapped is another search's: the resume refuses it before
# anything runs, naming the trial.
rm -rf async && mv async_killed async
"$PYTHON3" - async/trials.jsonl <<'PY'
import sys
rows = open(sys.argv[1]).read().splitlines(keepends=True)
rows[5], rows[25] = rows[25], rows[5]
open(sys.argv[1], "w").writelines(rows)
PY
expect_exit 3 'trials.jsonl: trial [0-9]+ was run with .*reordered|journal has [0-9]+ results, but replaying this config reaches only' -- "$MPIEXEC" -n 2 "$STRATA" run async.yaml
finish
