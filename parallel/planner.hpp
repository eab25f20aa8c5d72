// The bounded-batch planner: how N ranks split into G member groups x D replicas x M shards.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/plan.hpp"

namespace strata {

struct PlanRequest {
  int world_size = 1;
  int local_batch = 1;
  int max_global_batch = 0;  // 0: the local batch (no data parallelism)
  int fixed_model = 0;       // M fixed by the config; 0: choose
  int fixed_data = 0;        // D fixed by the config; 0: choose
  int accumulate = 1;        // K micro-batches per optimizer step; 0: as many as keep K*D*b <= B
  std::int64_t model_bytes = 0;  // weights + gradients + optimizer state of one whole model
  std::int64_t split_bytes = 0;  // the part of model_bytes in layers marked `split`: / M per rank
  std::int64_t memory_per_rank_bytes = 0;  // 0: no limit
  int ranks_per_node = 0;                  // 0: all ranks on one node
  bool one_group = false;  // every rank in one member group (parallel.layout: data): G = 1
};

// Chooses G, D and M (docs/parallelism.md):
//   M: the fixed value, else the smallest divisor of N whose shard of the model fits the memory
//   limit; D: the fixed value, else the largest D with D*b <= B such that D*M divides N; G = N /
//   (D*M): extra ranks become more member groups, never a larger batch.
// With one_group, D = N / M instead (an error when D x b exceeds B).
// Throws ConfigError with the actual numbers, and the nearest rank counts that would work, when no
// layout exists. It is pure arithmetic on the
// request, so every rank that calls it with the same request fails the same way before any
// collective.
Plan make_plan(const PlanRequest& request);

// A multi-line description: the numbers, why, and where each member group's ranks sit.
std::string describe(const Plan& plan, int max_groups_listed = 16);

}  // namespace strata
