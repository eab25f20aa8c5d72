// One trial of the hpo stage on its member group: a training of the config with the trial's
// values (from its own checkpoint if an earlier allocation stopped it), or a function evaluation.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/config.hpp"
#include "core/training_data.hpp"
#include "hpo/trial_scheduler.hpp"
#include "jobs/stage_context.hpp"

namespace strata {

// A genome's values as the YAML scalars that replace the config's references.
std::map<std::string, std::string> trial_values(const SearchSpace& space, const Genome& genome);

// The function's value at the trial's genome, after the objective's artificial evaluation time
// (serving meanwhile).
TrialOutcome evaluate_function(const ObjectiveSpec& objective, std::uint64_t seed,
                               const Trial& trial, const std::function<void()>& serve);

// Trains the trial's config on this member group. Every decision that ends it early (divergence,
// timeout, the pruning rule, a stop signal) is taken alike on all ranks of the group, so none is
// left in a collective; errors become failed trials where run_guarded_trial finds that safe, and
// a stop signal leaves it checkpointed.
TrialOutcome train_trial(const StageContext& c, const HpoSpec& spec, const SearchSpace& space,
                         const TrainingData& data, const Trial& trial, const TrialChannel& channel);

}  // namespace strata
