// The ensemble stage of `strata run`: its members train on the member groups (queued on the trial
// scheduler when there are more members than groups), and their predictions are combined over the
// peers communicator into ensemble_report.json.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/config.hpp"
#include "jobs/stage_context.hpp"

namespace strata {

// A config the ensemble's members are made from, and where it came from ("hpo.top_k[0]: trial
// 12", "the run's config").
struct EnsembleBase {
  std::string source;
  Config config;
};

// Collective over the world. Members are bases x variations (seeds, bootstrap samples or feature
// subsets), member m = base * variations + variation; each writes into
// <stage dir>/ensemble/<m>/ (config.yaml, member.json, metrics.jsonl, weights.h5,
// predictions.h5), and the stage's journal is <stage dir>/ensemble/trials.jsonl, so that a
// restart trains only the members not yet done (those in flight from their checkpoints). Returns,
// on world rank 0, the ensemble.members artifact (paths relative to the stage's directory).
nlohmann::json ensemble_stage(const StageContext& context, const EnsembleSpec& spec,
                              const std::vector<EnsembleBase>& bases);

}  // namespace strata
