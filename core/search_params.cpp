#include "core/search_params.hpp"

#include <cmath>

#include <fmt/format.h>

namespace strata {

namespace {

// Integers above 2^53 are not all representable as doubles, so they cannot be genes.
constexpr double max_exact_integer = 9007199254740992.0;

}  // namespace

std::string describe_value(const ParamSpec& spec, double gene) {
  const bool integral = std::isfinite(gene) && std::floor(gene) == gene;
  switch (spec.kind) {
    case ParamKind::choice:
      if (integral && gene >= 0 && gene < static_cast<double>(spec.choices.size()))
        return spec.choices[static_cast<std::size_t>(gene)];
      return fmt::format("<choice {} of {}>", gene, spec.choices.size());
    case ParamKind::integer:
      // Through an integer, so that an integer never prints with an exponent.
      if (integral && std::abs(gene) <= max_exact_integer)
        return fmt::format("{}", static_cast<long long>(gene));
      return fmt::format("{}", gene);
    default:
      // fmt writes the shortest decimal that reads back as the same double: nothing is lost.
      return fmt::format("{}", gene);
  }
}

std::vector<std::string> probe_values(const ParamSpec& spec) {
  if (spec.kind == ParamKind::choice) return spec.choices;
  const std::string lo = describe_value(spec, spec.lo), hi = describe_value(spec, spec.hi);
  if (spec.kind == ParamKind::integer) return {lo, hi};
  // A point inside as well, which is not a whole number, so that a real parameter used where an
  // integer is needed fails here rather than in the middle of a search.
  const double inside = spec.kind == ParamKind::log_uniform
                            ? std::exp((2 * std::log(spec.lo) + std::log(spec.hi)) / 3)
                            : spec.lo + (spec.hi - spec.lo) / 3;
  return {lo, hi, describe_value(spec, inside)};
}

std::map<std::string, std::string> first_probe_values(const std::vector<ParamSpec>& space) {
  std::map<std::string, std::string> first;
  for (const auto& p : space) first[p.name] = probe_values(p).front();
  return first;
}

std::vector<SingleProbe> single_parameter_probes(const std::vector<ParamSpec>& space) {
  const auto first = first_probe_values(space);
  std::vector<SingleProbe> probes;
  for (const auto& p : space)
    for (const auto& value : probe_values(p)) {
      SingleProbe probe{&p, value, first};
      probe.values[p.name] = value;
      probes.push_back(std::move(probe));
    }
  return probes;
}

}  // namespace strata
