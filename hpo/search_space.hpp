// Typed hyperparameter search spaces, and the genome that encodes one point of a space.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/rng.hpp"

namespace strata {

enum class ParamKind { uniform, log_uniform, integer, choice };

// One hyperparameter. lo and hi are inclusive bounds for uniform, log_uniform and integer;
// choices lists the values of a choice (lo and hi are then unused).
struct ParamSpec {
  std::string name;
  ParamKind kind = ParamKind::uniform;
  double lo = 0.0;
  double hi = 1.0;
  std::vector<std::string> choices;
};

struct SearchSpace {
  std::vector<ParamSpec> params;
};

// One gene per parameter, in the parameter's own units: a real value, an integral double for an
// integer, the index of the chosen value for a choice. Plain doubles keep the operators generic.
using Genome = std::vector<double>;

// "uniform", "log_uniform", "int", "choice": the names the YAML uses.
std::string_view kind_name(ParamKind kind);
// The inverse of kind_name; throws std::invalid_argument naming the accepted kinds.
ParamKind parse_param_kind(std::string_view name);

// Throw std::invalid_argument naming the parameter and the offending numbers when a spec cannot be
// searched: real bounds not finite or lo >= hi, lo <= 0 for log_uniform, integer bounds that are
// not integers or have lo > hi (lo == hi pins the value), no choices or a repeated one.
void validate(const ParamSpec& spec);
// Every parameter, plus names that are empty or repeated.
void validate(const SearchSpace& space);

// Number of distinct values of an integer or choice parameter (0 for real kinds).
double cardinality(const ParamSpec& spec);

// A gene drawn uniformly in the parameter's own scale (log scale for log_uniform).
double sample_value(const ParamSpec& spec, Rng& rng);
Genome sample(const SearchSpace& space, Rng& rng);

bool within(const ParamSpec& spec, double gene);
// True if the genome has one gene per parameter and each is a legal value of its parameter.
bool within(const SearchSpace& space, const Genome& genome);

// The nearest legal value: bounds for reals, then rounding for integers and choice indices.
// NaN genes become the lower bound (or the first choice), so a clamped genome is always legal.
double clamp_value(const ParamSpec& spec, double gene);
Genome clamp(const SearchSpace& space, Genome genome);

// Maps a real gene to the scale the operators work in (log for log_uniform), and back.
double to_search_scale(const ParamSpec& spec, double gene);
double from_search_scale(const ParamSpec& spec, double x);

// The gene as a user reads it: the choice's name, an integer without decimals, or the shortest
// decimal that round-trips for a real.
std::string describe_value(const ParamSpec& spec, double gene);
// "name=value, ..." for logs and error messages.
std::string describe(const SearchSpace& space, const Genome& genome);

}  // namespace strata
