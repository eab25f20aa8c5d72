// A transfer stage in hierarchical mode: a coarse classifier over super-classes and a flat model
// of the same parameter count train first; then one sub-classifier per super-class, each started
// from the coarse trunk, trains in parallel on the member groups; routing through them makes one
// classifier, reported against the flat one in hierarchy_report.json.
#pragma once

#include <optional>

#include <nlohmann/json.hpp>

#include "core/config.hpp"
#include "jobs/stage_context.hpp"
#include "jobs/transfer_stage.hpp"

namespace strata {

// Collective over the world. `source`: the coarse classifier's starting weights (its trunk), or
// none to train it from scratch. Returns, on world rank 0, the <stage>.model artifact.
nlohmann::json hierarchy_stage(const StageContext& context, const TransferSpec& spec,
                               const std::optional<PretrainedSource>& source);

}  // namespace strata
