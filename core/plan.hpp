// A run's decomposition as the planner chose it: G member groups x D replicas x M shards, and the
// accumulation K that gives each optimizer step its global batch. Pure data, so that the trainer
// (which knows no MPI) takes it as it is.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

namespace strata {

// A rank's share of its node's cores when `ranks_on_node` ranks share them: the worker threads
// strata run gives each rank unless told otherwise (at least 1).
inline int share_of_cores(int cores, int ranks_on_node) {
  return std::max(1, cores / std::max(1, ranks_on_node));
}

// Rank coordinates in the layout world_rank = m + M*d + M*D*g (model shards vary fastest,
// so the shards of one replica sit on neighbouring ranks, and therefore on one node when they can).
struct RankCoords {
  int group = 0;  // g
  int data = 0;   // d
  int model = 0;  // m
};

struct Plan {
  int groups = 1;  // G
  int data = 1;    // D
  int model = 1;   // M
  int world_size = 1;
  int local_batch = 1;
  int max_global_batch = 1;
  int ranks_per_node = 1;
  std::vector<std::string> reasons;  // why each number was chosen, for `strata plan` and plan.txt

  int accumulate = 1;  // K: micro-batches of D x local_batch per optimizer step

  int global_batch() const { return accumulate * data * local_batch; }
  int group_size() const { return data * model; }
  int world_rank(RankCoords c) const { return c.model + model * c.data + model * data * c.group; }
  RankCoords coords(int world_rank) const;
  int node_of(int world_rank) const { return world_rank / ranks_per_node; }
  // True when every replica's M shards share a node.
  bool model_groups_within_nodes() const;
};

}  // namespace strata
