// The hpo stage of `strata run`: a search whose trials train (or evaluate a function) on the member
// groups.
#pragma once

#include "core/config.hpp"
#include "jobs/stage_context.hpp"

namespace strata {

// Collective over the world. World rank 0 writes trials.csv, trials.jsonl and hpo_summary.json into
// the run's directory and prints the search's progress. A search an earlier allocation stopped
// goes on where it was: its journal is replayed and its unfinished trials resume from their own
// checkpoints. A stop signal checkpoints the trials in flight and throws Interrupted. Algorithm
// pbt runs as pbt_stage (jobs/pbt_stage.hpp) instead.
void hpo_stage(const StageContext& context, const HpoSpec& spec);

}  // namespace strata
