// The hpo stage of `strata run`: a search whose trials train (or evaluate a function) on the member
// groups.
#pragma once

#include "core/config.hpp"
#include "jobs/run_output.hpp"
#include "parallel/topology.hpp"

namespace strata {

// Collective over the world. World rank 0 writes trials.csv, trials.jsonl and hpo_summary.json into
// `output` (the run's directory; null on other ranks) and prints the search's progress.
void hpo_stage(const Config& config, const HpoSpec& spec, const Topology& topology, int threads,
               const RunOutput* output);

}  // namespace strata
