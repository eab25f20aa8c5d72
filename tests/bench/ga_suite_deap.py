"""DEAP 1.3's eaSimple on strata's benchmark functions, as practitioners run it: cxBlend (alpha
0.5), mutGaussian (sigma 10% of the range, indpb 0.2), selTournament (3), cxpb 0.7, mutpb 0.3,
children clipped to the bounds. Prints one JSON line per run: function, dims, budget, seed, the
best value found and the evaluations spent. Usage: ga_suite_deap.py BUDGETS DIMS SEEDS."""
import json
import math
import random
import sys

from deap import algorithms, base, creator, tools

HALF = {"sphere": 5.12, "rastrigin": 5.12, "rosenbrock": 2.048, "ackley": 32.768}


def value(name, x):
    if name == "sphere":
        return sum(v * v for v in x)
    if name == "rastrigin":
        return 10 * len(x) + sum(v * v - 10 * math.cos(2 * math.pi * v) for v in x)
    if name == "rosenbrock":
        return sum(100 * (x[i + 1] - x[i] ** 2) ** 2 + (1 - x[i]) ** 2 for i in range(len(x) - 1))
    n = len(x)
    return (-20 * math.exp(-0.2 * math.sqrt(sum(v * v for v in x) / n))
            - math.exp(sum(math.cos(2 * math.pi * v) for v in x) / n) + 20 + math.e)


def run(name, dims, budget, seed, population=50):
    random.seed(seed)
    half = HALF[name]
    creator.create("FitnessMin", base.Fitness, weights=(-1.0,)) if not hasattr(creator, "FitnessMin") else None
    creator.create("Individual", list, fitness=creator.FitnessMin) if not hasattr(creator, "Individual") else None
    box = base.Toolbox()
    box.register("gene", random.uniform, -half, half)
    box.register("individual", tools.initRepeat, creator.Individual, box.gene, dims)
    box.register("population", tools.initRepeat, list, box.individual)
    evaluations = [0]

    def evaluate(ind):
        evaluations[0] += 1
        return (value(name, ind),)

    def clipped(op):
        def wrapped(*args, **kwargs):
            children = op(*args, **kwargs)
            for child in children:
                for i, v in enumerate(child):
                    child[i] = min(max(v, -half), half)
            return children
        return wrapped

    box.register("evaluate", evaluate)
    box.register("mate", clipped(tools.cxBlend), alpha=0.5)
    box.register("mutate", clipped(tools.mutGaussian), mu=0.0, sigma=0.1 * 2 * half, indpb=0.2)
    box.register("select", tools.selTournament, tournsize=3)
    pop = box.population(n=population)
    hall = tools.HallOfFame(1)
    # eaSimple's loop (varAnd, then evaluate the changed children), run until the budget of
    # evaluations is spent, so that both searches get the same number.
    for ind in pop:
        ind.fitness.values = box.evaluate(ind)
    hall.update(pop)
    while evaluations[0] < budget:
        offspring = algorithms.varAnd(box.select(pop, len(pop)), box, cxpb=0.7, mutpb=0.3)
        invalid = [ind for ind in offspring if not ind.fitness.valid]
        for ind in invalid[: budget - evaluations[0]]:
            ind.fitness.values = box.evaluate(ind)
        offspring = [ind for ind in offspring if ind.fitness.valid]
        hall.update(offspring)
        if len(offspring) < len(pop):
            break
        pop[:] = offspring
    return hall[0].fitness.values[0], evaluations[0]


def main():
    budgets = [int(b) for b in sys.argv[1].split(",")]
    dims_list = [int(d) for d in sys.argv[2].split(",")]
    seeds = [int(s) for s in sys.argv[3].split(",")]
    for name in HALF:
        for dims in dims_list:
            for budget in budgets:
                for seed in seeds:
                    best, evaluations = run(name, dims, budget, seed)
                    print(json.dumps({"function": name, "dims": dims, "budget": budget, "seed": seed,
                                      "best": best, "evaluations": evaluations}))


if __name__ == "__main__":
    main()
