"""Optuna's default TPE sampler driving strata trainings: the peer of the Fashion-MNIST search bench.

Each Optuna trial is one `strata run` of the search config as a plain training (its hpo stage
removed, the trial's values put where the config says $name), on one rank; its objective is the
run's last val_accuracy, and a training that fails or diverges scores 0. Optuna proposes trials one
after another (n_jobs 1: the best case for TPE, which sees every earlier result). Writes
<out>/trials.csv with the columns run_hpo_fashion_bench.sh reads (trial, fitness, status, ended_s).

  /usr/bin/python3 optuna_fashion.py STRATA CONFIG SEED BUDGET OUT
"""
import csv
import json
import math
import os
import re
import subprocess
import sys
import time

import optuna
import yaml

strata, config_path, seed, budget, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
os.makedirs(out, exist_ok=True)
text = open(config_path).read()
tree = yaml.safe_load(text)
hpo = next(s["hpo"] for s in tree["stages"] if "hpo" in s)
space = hpo["space"]
# The plain training: the config's text without its stages, the run seed set.
plain = re.sub(r"(?ms)^stages:.*?(?=^\S)", "", text)
plain = re.sub(r"(?m)^  seed: \d+$", f"  seed: {seed}", plain)
# The trial configs lie elsewhere than the config: its data path, made absolute.
base = os.path.dirname(os.path.abspath(config_path))
plain = re.sub(r"(?m)^  path: (.+)$",
               lambda m: f"  path: {os.path.normpath(os.path.join(base, m.group(1).strip()))}", plain)
assert "$" in plain and "stages:" not in plain, "the config no longer has the shape this driver edits"


def suggest(trial, name, spec):
    kind, value = next(iter(spec.items()))
    if kind == "uniform":
        return trial.suggest_float(name, value[0], value[1])
    if kind == "log_uniform":
        return trial.suggest_float(name, value[0], value[1], log=True)
    if kind == "int":
        return trial.suggest_int(name, value[0], value[1])
    if kind == "choice":
        return trial.suggest_categorical(name, value)
    raise ValueError(f"unknown parameter kind {kind}")


rows = []
start = time.monotonic()


def objective(trial):
    values = {name: suggest(trial, name, spec) for name, spec in space.items()}
    run_dir = os.path.join(out, f"trial{trial.number}")
    config = plain
    # Longest names first: $units1 must not be read as $units followed by 1.
    for name in sorted(values, key=len, reverse=True):
        config = config.replace(f"${name}", repr(values[name]))
    config = re.sub(r"(?m)^  dir: .*$", f"  dir: {run_dir}", config)
    path = os.path.join(out, f"trial{trial.number}.yaml")
    open(path, "w").write(config)
    done = subprocess.run([strata, "run", path, "--fresh"], capture_output=True, text=True)
    fitness, status = 0.0, "failed"
    if done.returncode != 0 and "diverged" not in done.stdout + done.stderr:
        sys.exit(f"optuna_fashion.py: {path} failed for another reason than divergence:\n"
                 f"{done.stdout[-2000:]}{done.stderr[-2000:]}")
    if done.returncode == 0:
        last = open(os.path.join(run_dir, "metrics.jsonl")).read().splitlines()[-1]
        accuracy = json.loads(last).get("val_accuracy")
        if accuracy is not None and math.isfinite(accuracy):
            fitness, status = accuracy, "ok"
    rows.append({"trial": trial.number, "fitness": fitness, "status": status,
                 "ended_s": time.monotonic() - start})
    return fitness


optuna.logging.set_verbosity(optuna.logging.WARNING)
study = optuna.create_study(direction="maximize", sampler=optuna.samplers.TPESampler(seed=seed))
study.optimize(objective, n_trials=budget)
with open(os.path.join(out, "trials.csv"), "w", newline="") as f:
    writer = csv.DictWriter(f, fieldnames=["trial", "fitness", "status", "ended_s"])
    writer.writeheader()
    writer.writerows(rows)
json.dump({"trainings": len(rows), "wall_seconds": time.monotonic() - start,
           "best": {"fitness": study.best_value}}, open(os.path.join(out, "hpo_summary.json"), "w"))
