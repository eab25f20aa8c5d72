// Population-based training, the hpo stage's algorithm `pbt`: the population's members train at
// once, member m on member group m mod G; every `interval` epochs they are ranked over the peers
// communicator, and the worst continue from a best member's weights and optimizer (sent point to
// point between the groups' ranks, shard by shard) with perturbed values.
#pragma once

#include "core/config.hpp"
#include "jobs/stage_context.hpp"

namespace strata {

// Collective over the world. World rank 0 writes pbt.csv, pbt.jsonl, hpo_summary.json, best.yaml
// and best_weights.h5 into the run's directory; each member's curve, final weights and config go
// to members/<m>/. A run an earlier allocation stopped replays its journal and goes on from each
// member's checkpoint (redoing the exploits of a round the stop cut short). A stop signal
// checkpoints every member in training and throws Interrupted.
void pbt_stage(const StageContext& context, const HpoSpec& spec);

}  // namespace strata
