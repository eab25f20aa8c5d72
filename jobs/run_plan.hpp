// A run's decomposition: the planner's request built from the config, the model's size and the
// world.
#pragma once

#include <cstdint>
#include <map>

#include "core/config.hpp"
#include "parallel/planner.hpp"

namespace strata {

struct ModelSize {
  std::int64_t parameters = 0;
  std::int64_t bytes = 0;        // weights, gradients and optimizer state, float32
  std::int64_t split_bytes = 0;  // the part of bytes in layers marked `split`
  // The searched values of the largest model probed (empty when nothing is searched).
  std::map<std::string, std::string> largest_trial;

  // What one of M shards holds: the unsplit layers whole, its share of the split ones.
  std::int64_t bytes_per_shard(int model) const {
    return bytes - split_bytes + split_bytes / model;
  }
};

// Builds the model for the data's sample shape (reading only the HDF5 file's shapes) and counts it.
ModelSize model_size(const Config& config);

// A bound on the models search trials can build (the config's own model when nothing is
// searched): the largest unsplit part plus the largest split part over the models probed, as far
// as a coordinate ascent over each parameter's bounds and choices finds them. The run is planned
// so that a shard of it fits. Throws ConfigError when no probe builds a model (every trial would
// fail).
ModelSize largest_model_size(const Config& config);

// Every class label the config selects (data.classes, a transfer stage's classes and
// super-classes, the last among data.classes' relabelled 0..k-1 when it is set) is one of the
// data's (the HDF5 file's class count, read without its samples): a ConfigError naming the label
// otherwise, so that a transfer's bad label does not wait for the stages before it to train.
void check_class_labels(const Config& config);

// STRATA_RANKS_PER_NODE when set (tests use it to pretend to have several nodes), else `measured`.
int ranks_per_node(int measured);

// The plan for `world_size` ranks. Planner errors become ConfigErrors that name the config file
// and the parallel section's line. A searched local batch is planned at the largest value a trial
// can have. `known_size`: largest_model_size(config) when the caller has it already.
Plan plan_run(const Config& config, int world_size, int ranks_per_node,
              const ModelSize* known_size = nullptr);

// The plan of `config` on the run's layout (its G, D and M) for the config's own local batch: the
// accumulation K of a search trial, or of a train stage when the run was planned for a larger
// searched batch. Throws ConfigError when that global batch cannot fit the bound.
Plan plan_on_run_layout(const Config& config, const Plan& run);

}  // namespace strata
