// Search-space validation, sampling, bounds and display.
#include "hpo/search_space.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "core/config_names.hpp"

namespace strata {

namespace {

[[noreturn]] void reject(const ParamSpec& spec, const std::string& why) {
  throw std::invalid_argument(
      fmt::format("search space: parameter '{}' ({}): {}", spec.name, to_string(spec.kind), why));
}

// Integers above 2^53 are not all representable as doubles, so they cannot be genes.
constexpr double max_exact_integer = 9007199254740992.0;

bool is_integral(double v) {
  return std::isfinite(v) && std::floor(v) == v;
}

}  // namespace

void validate(const ParamSpec& spec) {
  if (spec.name.empty()) reject(spec, "the parameter has no name");
  const std::string bounds = fmt::format("[{}, {}]", spec.lo, spec.hi);
  switch (spec.kind) {
    case ParamKind::uniform:
    case ParamKind::log_uniform:
      if (!std::isfinite(spec.lo) || !std::isfinite(spec.hi))
        reject(spec, fmt::format("bounds {} must be finite", bounds));
      if (!(spec.lo < spec.hi)) reject(spec, fmt::format("lo must be below hi, got {}", bounds));
      if (spec.kind == ParamKind::log_uniform && !(spec.lo > 0.0))
        reject(spec, fmt::format("lo must be positive on a log scale, got {}", bounds));
      break;
    case ParamKind::integer:
      if (!is_integral(spec.lo) || !is_integral(spec.hi))
        reject(spec, fmt::format("bounds {} must be integers", bounds));
      if (std::abs(spec.lo) > max_exact_integer || std::abs(spec.hi) > max_exact_integer)
        reject(spec, fmt::format("bounds {} exceed 2^53", bounds));
      // lo == hi is allowed: a pinned integer is a legitimate way to switch a parameter off.
      if (spec.lo > spec.hi) reject(spec, fmt::format("lo must not exceed hi, got {}", bounds));
      break;
    case ParamKind::choice: {
      if (spec.choices.empty()) reject(spec, "the choice has no values");
      std::set<std::string> seen;
      for (const auto& c : spec.choices) {
        if (!seen.insert(c).second) reject(spec, fmt::format("the value '{}' is listed twice", c));
      }
      break;
    }
  }
}

void validate(const SearchSpace& space) {
  if (space.params.empty()) throw std::invalid_argument("search space: no parameters");
  std::set<std::string> names;
  for (const auto& p : space.params) {
    validate(p);
    if (!names.insert(p.name).second)
      throw std::invalid_argument(
          fmt::format("search space: parameter '{}' is defined twice", p.name));
  }
}

double cardinality(const ParamSpec& spec) {
  switch (spec.kind) {
    case ParamKind::integer:
      return spec.hi - spec.lo + 1.0;
    case ParamKind::choice:
      return static_cast<double>(spec.choices.size());
    default:
      return 0.0;
  }
}

double sample_value(const ParamSpec& spec, Rng& rng) {
  switch (spec.kind) {
    case ParamKind::uniform:
      return clamp_value(spec, spec.lo + (spec.hi - spec.lo) * rng.uniform_double());
    case ParamKind::log_uniform: {
      const double a = std::log(spec.lo), b = std::log(spec.hi);
      // exp(log(x)) can land one ulp outside the bounds; clamping keeps the sample legal.
      return clamp_value(spec, std::exp(a + (b - a) * rng.uniform_double()));
    }
    case ParamKind::integer:
      return spec.lo +
             static_cast<double>(rng.below(static_cast<std::uint64_t>(cardinality(spec))));
    case ParamKind::choice:
      return static_cast<double>(rng.below(spec.choices.size()));
  }
  return spec.lo;
}

Genome sample(const SearchSpace& space, Rng& rng) {
  Genome g;
  g.reserve(space.params.size());
  for (const auto& p : space.params) g.push_back(sample_value(p, rng));
  return g;
}

double value_at(const ParamSpec& spec, double u) {
  u = std::clamp(u, 0.0, 1.0);
  switch (spec.kind) {
    case ParamKind::uniform:
      return clamp_value(spec, spec.lo + (spec.hi - spec.lo) * u);
    case ParamKind::log_uniform: {
      const double a = std::log(spec.lo), b = std::log(spec.hi);
      return clamp_value(spec, std::exp(a + (b - a) * u));
    }
    case ParamKind::integer:
      return clamp_value(spec, spec.lo + std::floor(u * cardinality(spec)));
    case ParamKind::choice:
      return clamp_value(spec, std::floor(u * static_cast<double>(spec.choices.size())));
  }
  return spec.lo;
}

std::vector<Genome> latin_hypercube(const SearchSpace& space, int n, Rng& rng) {
  std::vector<Genome> design(static_cast<std::size_t>(std::max(n, 0)));
  for (const ParamSpec& p : space.params) {
    // A random permutation of the n strata (Fisher-Yates), one point in each.
    std::vector<int> strata(design.size());
    for (std::size_t i = 0; i < strata.size(); ++i) strata[i] = static_cast<int>(i);
    for (std::size_t i = strata.size(); i > 1; --i) std::swap(strata[i - 1], strata[rng.below(i)]);
    for (std::size_t i = 0; i < design.size(); ++i)
      design[i].push_back(
          value_at(p, (strata[i] + rng.uniform_double()) / static_cast<double>(design.size())));
  }
  return design;
}

bool within(const ParamSpec& spec, double gene) {
  switch (spec.kind) {
    case ParamKind::uniform:
    case ParamKind::log_uniform:
      return gene >= spec.lo && gene <= spec.hi;
    case ParamKind::integer:
      return is_integral(gene) && gene >= spec.lo && gene <= spec.hi;
    case ParamKind::choice:
      return is_integral(gene) && gene >= 0.0 && gene < static_cast<double>(spec.choices.size());
  }
  return false;
}

bool within(const SearchSpace& space, const Genome& genome) {
  if (genome.size() != space.params.size()) return false;
  for (std::size_t i = 0; i < genome.size(); ++i) {
    if (!within(space.params[i], genome[i])) return false;
  }
  return true;
}

double clamp_value(const ParamSpec& spec, double gene) {
  if (std::isnan(gene)) return spec.kind == ParamKind::choice ? 0.0 : spec.lo;
  switch (spec.kind) {
    case ParamKind::uniform:
    case ParamKind::log_uniform:
      return std::clamp(gene, spec.lo, spec.hi);
    case ParamKind::integer:
      return std::clamp(std::round(gene), spec.lo, spec.hi);
    case ParamKind::choice:
      return std::clamp(std::round(gene), 0.0, static_cast<double>(spec.choices.size()) - 1.0);
  }
  return gene;
}

Genome clamp(const SearchSpace& space, Genome genome) {
  if (genome.size() != space.params.size())
    throw std::invalid_argument(fmt::format("search space: a genome of {} genes for {} parameters",
                                            genome.size(), space.params.size()));
  for (std::size_t i = 0; i < genome.size(); ++i)
    genome[i] = clamp_value(space.params[i], genome[i]);
  return genome;
}

double to_search_scale(const ParamSpec& spec, double gene) {
  return spec.kind == ParamKind::log_uniform ? std::log(gene) : gene;
}

double from_search_scale(const ParamSpec& spec, double x) {
  return spec.kind == ParamKind::log_uniform ? std::exp(x) : x;
}

std::string describe(const SearchSpace& space, const Genome& genome) {
  std::string out;
  for (std::size_t i = 0; i < space.params.size() && i < genome.size(); ++i) {
    if (i > 0) out += ", ";
    out += fmt::format("{}={}", space.params[i].name, describe_value(space.params[i], genome[i]));
  }
  return out;
}

}  // namespace strata
