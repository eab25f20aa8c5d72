// The results a finished population-based training leaves in output.dir.
//
// best.yaml and best_weights.h5 (the best member at the end), each member's config with its last
// values, and hpo_summary.json with the lineage of the best.
#pragma once

#include "core/config.hpp"
#include "hpo/pbt.hpp"
#include "hpo/search_space.hpp"

namespace strata {

// On world rank 0, after the last round: writes those files from `population`'s history.
void publish_pbt_results(const Config& config, const HpoSpec& spec, const SearchSpace& space,
                         const PbtPopulation& population, double wall_seconds);

}  // namespace strata
