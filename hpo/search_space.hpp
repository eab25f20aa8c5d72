// Typed hyperparameter search spaces, and the genome that encodes one point of a space.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/rng.hpp"
#include "core/search_params.hpp"

namespace strata {

// One gene per parameter, in the parameter's own units: a real value, an integral double for an
// integer, the index of the chosen value for a choice. Plain doubles keep the operators generic.
using Genome = std::vector<double>;

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

// The gene at fraction u of the parameter's range in its own scale: u in [0, 1] maps linearly
// onto a real's interval (its logarithm for log_uniform), and onto equal shares of the values of
// an integer or a choice.
double value_at(const ParamSpec& spec, double u);
// n genomes that split each parameter's range into n equal strata and take one point from each,
// paired at random across parameters (a Latin hypercube): spread out better than n independent
// samples, for a model's first look at the space.
std::vector<Genome> latin_hypercube(const SearchSpace& space, int n, Rng& rng);

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

// "name=value, ..." for logs and error messages.
std::string describe(const SearchSpace& space, const Genome& genome);

}  // namespace strata
