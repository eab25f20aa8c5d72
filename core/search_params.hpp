// The typed hyperparameters of a search space, as a config declares them and the search samples
// them: one definition for the config reader, the search and the trial log.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/source_mark.hpp"

namespace strata {

enum class ParamKind { uniform, log_uniform, integer, choice };

// Early stopping of a search's trainings (hpo/pruning.hpp applies it).
enum class PruneRule { none, median, asha };

struct PruneSettings {
  PruneRule rule = PruneRule::none;
  int after_epochs = 1;      // no trial is stopped before the end of this epoch
  int min_trials = 5;        // median: other trials with a value at the epoch before it applies
  int reduction_factor = 3;  // asha: eta; rungs at after_epochs x eta^k epochs
};

// One hyperparameter. lo and hi are inclusive bounds for uniform, log_uniform and integer;
// choices lists the values of a choice as YAML scalars (lo and hi are then unused).
struct ParamSpec {
  ParamSpec() = default;
  ParamSpec(std::string name, ParamKind kind, double lo, double hi,
            std::vector<std::string> choices = {}, SourceMark mark = {})
      : name(std::move(name)),
        kind(kind),
        lo(lo),
        hi(hi),
        choices(std::move(choices)),
        mark(mark) {}

  std::string name;
  ParamKind kind = ParamKind::uniform;
  double lo = 0.0;
  double hi = 1.0;
  std::vector<std::string> choices;
  SourceMark mark;  // where the config declares it; line 0 for spaces made in code
};

// Values elsewhere in a config refer to a parameter as "$name".
struct SearchSpace {
  std::vector<ParamSpec> params;
};

// A gene as a user reads it and as it replaces "$name" in a config: the choice itself, an
// integer without decimals, or the shortest decimal that reads back as the same double.
std::string describe_value(const ParamSpec& spec, double gene);

// The values at which every reference to a parameter is checked when the config is read: its
// bounds and, for reals, a point inside that is not a whole number; or every choice.
std::vector<std::string> probe_values(const ParamSpec& spec);

// Every parameter of `space` at its first probe value.
std::map<std::string, std::string> first_probe_values(const std::vector<ParamSpec>& space);

// One parameter at one of its probe values, every other at its first.
struct SingleProbe {
  const ParamSpec* param;
  std::string value;
  std::map<std::string, std::string> values;
};
// Every such probe of `space`, parameter by parameter.
std::vector<SingleProbe> single_parameter_probes(const std::vector<ParamSpec>& space);

}  // namespace strata
