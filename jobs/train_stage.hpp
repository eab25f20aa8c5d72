// The train stage of `strata run`: each member group trains its share of the stage's members, each
// to its end across allocations (resumed from its own checkpoints).
#pragma once

#include <filesystem>

#include "core/config.hpp"
#include "jobs/stage_context.hpp"

namespace strata {

// Collective over the world's member groups. The stage trains context.first_groups members, each
// an independent training of the config with its own seed derive(run.seed, member), so that a
// restart on another number of member groups trains the same members (group g takes members g,
// g + G, ...). Throws Interrupted after checkpointing when a stop signal arrives.
void train_stage(const StageContext& context);

// Where member `member` of a train stage writes: output.dir itself when the stage has one member,
// else output.dir/members/<member>.
std::filesystem::path member_dir(const Config& config, int members, int member);

}  // namespace strata
