// Sphere, Rastrigin, Rosenbrock and Ackley, their domains, and artificial evaluation times.
#include "hpo/objectives.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>
#include <stdexcept>

#include <fmt/format.h>

#include "core/rng.hpp"
#include "hpo/search.hpp"

namespace strata {

namespace {

constexpr ObjectiveKind all_objectives[] = {ObjectiveKind::sphere, ObjectiveKind::rastrigin,
                                            ObjectiveKind::rosenbrock, ObjectiveKind::ackley};

}  // namespace

std::string_view objective_name(ObjectiveKind kind) {
  switch (kind) {
    case ObjectiveKind::sphere:
      return "sphere";
    case ObjectiveKind::rastrigin:
      return "rastrigin";
    case ObjectiveKind::rosenbrock:
      return "rosenbrock";
    case ObjectiveKind::ackley:
      return "ackley";
  }
  return "?";
}

ObjectiveKind parse_objective(std::string_view name) {
  for (auto kind : all_objectives) {
    if (objective_name(kind) == name) return kind;
  }
  throw std::invalid_argument(fmt::format(
      "objective: unknown function '{}' (expected rastrigin, sphere, rosenbrock or ackley)", name));
}

double sphere(std::span<const double> x) {
  double s = 0.0;
  for (double v : x) s += v * v;
  return s;
}

double rastrigin(std::span<const double> x) {
  double s = 10.0 * static_cast<double>(x.size());
  for (double v : x) s += v * v - 10.0 * std::cos(2.0 * std::numbers::pi * v);
  return s;
}

double rosenbrock(std::span<const double> x) {
  double s = 0.0;
  for (std::size_t i = 0; i + 1 < x.size(); ++i) {
    const double a = x[i + 1] - x[i] * x[i], b = 1.0 - x[i];
    s += 100.0 * a * a + b * b;
  }
  return s;
}

double ackley(std::span<const double> x) {
  if (x.empty()) return 0.0;
  const double n = static_cast<double>(x.size());
  double sq = 0.0, cs = 0.0;
  for (double v : x) {
    sq += v * v;
    cs += std::cos(2.0 * std::numbers::pi * v);
  }
  // Grouped so that each bracket cancels exactly at the optimum, which then evaluates to 0 rather
  // than to the rounding error of -20 - e + 20 + e.
  return 20.0 * (1.0 - std::exp(-0.2 * std::sqrt(sq / n))) + (std::numbers::e - std::exp(cs / n));
}

double evaluate_objective(ObjectiveKind kind, std::span<const double> x) {
  switch (kind) {
    case ObjectiveKind::sphere:
      return sphere(x);
    case ObjectiveKind::rastrigin:
      return rastrigin(x);
    case ObjectiveKind::rosenbrock:
      return rosenbrock(x);
    case ObjectiveKind::ackley:
      return ackley(x);
  }
  return std::numeric_limits<double>::quiet_NaN();
}

SearchSpace objective_space(ObjectiveKind kind, int dims) {
  if (dims < 1)
    throw std::invalid_argument(
        fmt::format("objective {}: {} dimensions (must be >= 1)", objective_name(kind), dims));
  double half = 5.12;
  if (kind == ObjectiveKind::rosenbrock) half = 2.048;
  if (kind == ObjectiveKind::ackley) half = 32.768;
  SearchSpace space;
  for (int i = 0; i < dims; ++i)
    space.params.push_back({fmt::format("x{}", i), ParamKind::uniform, -half, half, {}});
  return space;
}

SearchSpace objective_space(std::string_view name, int dims) {
  return objective_space(parse_objective(name), dims);
}

double eval_seconds(const EvalTime& time, std::uint64_t seed, int trial_id) {
  if (!(time.mean_s >= 0.0) || !(time.stddev_s >= 0.0))
    throw std::invalid_argument(
        fmt::format("objective: evaluation time mean {} s, stddev {} s (both must be >= 0)",
                    time.mean_s, time.stddev_s));
  if (time.stddev_s == 0.0) return time.mean_s;
  Rng rng(derive_seed(seed, {seed_hpo, hpo_eval_time, static_cast<std::uint64_t>(trial_id)}));
  return std::max(0.0, time.mean_s + time.stddev_s * static_cast<double>(rng.normal()));
}

}  // namespace strata
