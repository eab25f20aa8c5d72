// The train stage of `strata run`: each member group trains its share of the stage's members, each
// to its end across allocations (resumed from its own checkpoints).
#pragma once

#include <filesystem>

#include "core/config.hpp"
#include "jobs/stop_signals.hpp"
#include "parallel/topology.hpp"

namespace strata {

struct TrainStageContext {
  const Config& config;
  const Topology& topology;
  int threads = 1;
  int stage_index = 0;
  // Independent trainings of the config, each with its own seed derive(run.seed, member); fixed by
  // the run's first allocation, so that a restart on another number of member groups trains the
  // same members (group g takes members g, g + G, ...).
  int members = 1;
  const StopSignals* signals = nullptr;
};

// Collective over the world's member groups. Throws Interrupted after checkpointing when a stop
// signal arrives.
void train_stage(const TrainStageContext& context);

// Where member `member` of a train stage writes: output.dir itself when the stage has one member,
// else output.dir/members/<member>.
std::filesystem::path member_dir(const Config& config, int members, int member);

}  // namespace strata
