// What every stage of `strata run` is handed: the config, the ranks' layout, and where the run
// stands across allocations.
#pragma once

#include <cstdint>
#include <filesystem>

#include "core/config.hpp"
#include "core/trace.hpp"
#include "jobs/run_output.hpp"
#include "jobs/stop_signals.hpp"
#include "parallel/topology.hpp"

namespace strata {

struct StageContext {
  // The run's config with output.dir set to this stage's directory: the run's own directory for
  // the first stage of a kind, <output.dir>/<stage name> for the next ones ("train2", "hpo2").
  const Config& config;
  const Topology& topology;
  int threads = 1;
  int stage_index = 0;
  // What the stage's own random streams (its members' and trials' seeds, a search's draws) derive
  // from: run.seed for the first stage of a kind, derive(run.seed, {seed_stage, stage_index}) for
  // a later one, so that two searches of one space do not propose the same trials. The data split
  // and normalisation stay run.seed's, alike in every stage.
  std::uint64_t seed = 0;
  // The number of member groups of the run's first allocation. It fixes what must not change
  // when a restart has another number of ranks: a train stage's members (each its own training
  // with seed derive(run.seed, member)), and the batch size of a random or grid search.
  int first_groups = 1;
  const StopSignals* signals = nullptr;
  const RunOutput* output = nullptr;  // the stage's directory, on world rank 0 only
  std::filesystem::path run_dir;      // the run's output.dir, to which artifact paths are relative
  // Every member group prints its own progress lines ([g<n>] prefix) beside world rank 0's lines
  // for the whole stage (strata run --verbose).
  bool verbose = false;
  // output.trace: this process's timeline (null: off).
  Trace* trace = nullptr;
};

}  // namespace strata
