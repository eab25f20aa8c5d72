// Benchmark functions that stand in for training, so that searches and the scheduler can be tested
// with thousands of evaluations in seconds.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

#include "hpo/search_space.hpp"

namespace strata {

// Each has its minimum 0: at the origin, except rosenbrock at (1, ..., 1).
enum class ObjectiveKind { sphere, rastrigin, rosenbrock, ackley };

std::string_view objective_name(ObjectiveKind kind);
// Throws std::invalid_argument naming the known objectives.
ObjectiveKind parse_objective(std::string_view name);

double sphere(std::span<const double> x);
double rastrigin(std::span<const double> x);
double rosenbrock(std::span<const double> x);
double ackley(std::span<const double> x);
double evaluate_objective(ObjectiveKind kind, std::span<const double> x);

// n uniform parameters x0 .. x{n-1} over the function's usual domain: [-5.12, 5.12] for sphere
// and rastrigin, [-2.048, 2.048] for rosenbrock, [-32.768, 32.768] for ackley.
SearchSpace objective_space(ObjectiveKind kind, int dims);
SearchSpace objective_space(std::string_view name, int dims);

// An artificial evaluation time, so that scheduler tests see slow and fast individuals.
struct EvalTime {
  double mean_s = 0.0;
  double stddev_s = 0.0;
};

// The seconds trial `trial_id` should take: normal with the given mean and standard deviation,
// truncated at 0, drawn from the run seed and the trial id so every run sees the same times.
double eval_seconds(const EvalTime& time, std::uint64_t seed, int trial_id);

}  // namespace strata
