"""Fits a surrogate of the Fashion-MNIST search's objective, for strata_bench_search_surrogate.

The objective is configs/fashion_hpo.yaml's: validation accuracy after one epoch of an MLP as a
function of its seven hyperparameters. The surrogate is the median of five small networks (7-64-64-
32-1, SiLU) fitted to every one-epoch training in the trials.csv files under the given directories
(as run_hpo_fashion_bench.sh and the hpo stage write them; a failed training counts as 0.1, the
accuracy of a guess). Their median smooths the peaks that single networks invent where diverging and
converging trainings meet. Inputs are the search space's unit cube as the GP search encodes it
(UnitEncoding in hpo/gp_search.hpp), which unit_point repeats.

  /usr/bin/python3 fit_search_surrogate.py OUT.txt DIR [DIR ...]
"""
import csv
import glob
import math
import os
import sys

import numpy as np
import torch

BATCHES = [16, 32, 64, 128, 256, 512]


def unit_point(r):
    return [(math.log10(float(r["lr"])) + 4) / 4, float(r["momentum"]) / 0.99,
            (math.log10(float(r["weight_decay"])) + 6) / 4, (int(r["units1"]) - 16) / 496,
            (int(r["units2"]) - 16) / 496, float(r["dropout"]) / 0.6,
            BATCHES.index(int(r["batch"])) / 5]


def gather(dirs):
    rows = []
    for d in dirs:
        for path in glob.glob(os.path.join(d, "**", "trials.csv"), recursive=True):
            with open(path) as f:
                for r in csv.DictReader(f):
                    if "units1" not in r or r["status"] not in ("ok", "failed"):
                        continue
                    # A training of more epochs (or one that failed in a later epoch) is not
                    # this objective, nor is another config's batch size.
                    if int(r["epochs"] or 0) > 1 or int(r["batch"]) not in BATCHES:
                        continue
                    rows.append(unit_point(r) + [float(r["fitness"]) if r["status"] == "ok" else 0.1])
    return np.array(rows, dtype=np.float32)


def fit(x, y, seed, epochs=120):
    torch.manual_seed(seed)
    net = torch.nn.Sequential(torch.nn.Linear(7, 64), torch.nn.SiLU(), torch.nn.Linear(64, 64),
                              torch.nn.SiLU(), torch.nn.Linear(64, 32), torch.nn.SiLU(),
                              torch.nn.Linear(32, 1))
    opt = torch.optim.Adam(net.parameters(), lr=2e-3)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(opt, epochs)
    for _ in range(epochs):
        order = torch.randperm(len(x))
        for i in range(0, len(x), 256):
            batch = order[i:i + 256]
            loss = ((net(x[batch]) - y[batch]) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        schedule.step()
    return net


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    torch.set_num_threads(1)
    data = gather(sys.argv[2:])
    if len(data) < 1000:
        sys.exit(f"fit_search_surrogate.py: {len(data)} one-epoch trainings found; it needs 1000 or more")
    rng = np.random.default_rng(0)
    rng.shuffle(data)
    held = len(data) // 10
    x, y = torch.tensor(data[:, :7]), torch.tensor(data[:, 7:])
    nets = [fit(x[held:], y[held:], seed) for seed in range(1, 6)]
    with torch.no_grad():
        predicted = torch.stack([n(x[:held]) for n in nets]).median(dim=0).values.squeeze()
        truth = y[:held].squeeze()
        top = truth > 0.8
        print(f"{len(data)} trainings; held-out rmse {float((predicted - truth).pow(2).mean().sqrt()):.4f}, "
              f"above 0.8 {float((predicted - truth)[top].pow(2).mean().sqrt()):.4f}")
    with open(sys.argv[1], "w") as out:
        out.write(f"{len(nets)}\n")
        for net in nets:
            layers = [m for m in net if isinstance(m, torch.nn.Linear)]
            out.write(f"{len(layers)}\n")
            for m in layers:
                w, b = m.weight.detach().numpy(), m.bias.detach().numpy()
                out.write(f"{w.shape[0]} {w.shape[1]}\n")
                out.write(" ".join(f"{v:.6g}" for v in w.flatten()) + "\n")
                out.write(" ".join(f"{v:.6g}" for v in b) + "\n")


if __name__ == "__main__":
    main()
