"""What a fitted surrogate of the Fashion-MNIST search's objective says about its landscape.

Reads the networks fit_search_surrogate.py writes (tests/bench/surrogates/fashion_hpo.txt), draws
uniform points of the search space's unit cube (integers rounded, the batch snapped to its six
choices, as the GP search encodes them) and prints: the share of the space whose surrogate value
(the networks' median) reaches each level; random search's chance per training of reaching 0.825
with the trainings' spread about the surrogate (normal, sd 0.009, as strata_bench_search_surrogate
adds it); the largest value drawn; what a training measured at about 0.82 says about its expected
value; and where the points at or above 0.825 lie, per input, with the
correlation of the learning rate and the momentum among them.

  /usr/bin/python3 surrogate_landscape.py [SURROGATE] [POINTS] [SEED]
"""
import math
import sys

import numpy as np

INPUTS = ["log10 lr", "momentum", "log10 weight_decay", "units1", "units2", "dropout", "batch"]


def load(path):
    words = open(path).read().split("\n")
    at = 0

    def line():
        nonlocal at
        at += 1
        return words[at - 1]

    nets = []
    for _ in range(int(line())):
        layers = []
        for _ in range(int(line())):
            rows, cols = map(int, line().split())
            weight = np.array(line().split(), dtype=float).reshape(rows, cols)
            bias = np.array(line().split(), dtype=float)
            layers.append((weight, bias))
        nets.append(layers)
    return nets


def surrogate(nets, x):
    outputs = []
    for layers in nets:
        h = x
        for k, (weight, bias) in enumerate(layers):
            h = h @ weight.T + bias
            if k < len(layers) - 1:
                h = h / (1 + np.exp(-h))  # SiLU
        outputs.append(h[:, 0])
    return np.median(np.array(outputs), axis=0)


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else "tests/bench/surrogates/fashion_hpo.txt"
    points = int(sys.argv[2]) if len(sys.argv) > 2 else 200000
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    x = np.random.default_rng(seed).random((points, 7))
    x[:, 3:5] = np.round(x[:, 3:5] * 496) / 496
    x[:, 6] = np.minimum(np.floor(x[:, 6] * 6), 5) / 5
    y = surrogate(load(path), x)
    print(f"{points} uniform points of the unit cube, seed {seed}, surrogate {path}")
    for level in (0.8, 0.81, 0.815, 0.82, 0.825, 0.83):
        print(f"  surrogate >= {level}: {100 * np.mean(y >= level):.3f}% of the space")
    erf = np.vectorize(math.erf)
    hit = 0.5 * (1 - erf((0.825 - y) / (0.009 * math.sqrt(2))))
    print(f"  random search's chance per training of reaching 0.825 with noise sd 0.009: "
          f"{100 * hit.mean():.2f}%")
    print(f"  largest surrogate value drawn: {y.max():.4f}; below 0.5 (collapsed): "
          f"{100 * np.mean(y < 0.5):.1f}%")
    measured = y + np.random.default_rng(seed + 1).normal(0.0, 0.009, y.size)
    near = (measured >= 0.818) & (measured <= 0.822)
    print(f"  of the points measured at 0.818-0.822 with that spread (drawn once), expected 0.815 or "
          f"more: {100 * np.mean(y[near] >= 0.815):.0f}%, under 0.81: {100 * np.mean(y[near] < 0.81):.0f}%")
    good = y >= 0.825
    print(f"  where the {good.sum()} points at or above 0.825 lie (unit-cube quantiles 10/50/90%):")
    for j, name in enumerate(INPUTS):
        q = np.quantile(x[good, j], [0.1, 0.5, 0.9])
        print(f"    {name:20s} {q[0]:.2f} {q[1]:.2f} {q[2]:.2f}")
    print(f"  correlation of log10 lr and momentum among them: "
          f"{np.corrcoef(x[good, 0], x[good, 1])[0, 1]:.2f}")


if __name__ == "__main__":
    main()
