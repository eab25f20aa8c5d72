// A rank's nested communicators, all derived in one place from the plan's layout formula.
#pragma once

#include "parallel/communicator.hpp"
#include "parallel/planner.hpp"

namespace strata {

// world_rank = m + M*d + M*D*g. From that one formula:
//   member: the D*M ranks of group g (ordered by d*M + m)   — trains one model together
//   data:   the ranks of group g with the same m (ordered by d) — averages gradients
//   model:  the ranks of group g with the same d (ordered by m) — holds one replica's shards
//   peers:  the ranks with the same (d, m) in every group (ordered by g) — exchanges models
// and, for the hierarchical allreduce, with nodes as the plan lays them out (plan.node_of):
//   data_node:   the ranks of `data` on this rank's node (ordered by d) — share a memory window
//   data_across: the ranks of `data` with this rank's index in data_node, one per node (ordered by
//                node) — allreduce across nodes
class Topology {
 public:
  // Collective over `world`, which must outlive the topology. Every rank must pass the same plan,
  // made for world.size() ranks; a plan for another size throws std::invalid_argument on every
  // rank before any split.
  Topology(const Communicator& world, const Plan& plan);

  const Plan& plan() const { return plan_; }
  RankCoords coords() const { return coords_; }
  int world_rank() const { return world_rank_; }
  const Communicator& world() const { return world_; }
  const Communicator& member() const { return member_; }
  const Communicator& data() const { return data_; }
  const Communicator& model() const { return model_; }
  const Communicator& peers() const { return peers_; }
  const Communicator& data_node() const { return data_node_; }
  const Communicator& data_across() const { return data_across_; }

 private:
  const Communicator& world_;
  Plan plan_;
  int world_rank_;
  RankCoords coords_;
  Communicator member_, data_, model_, peers_, data_node_, data_across_;
};

// Ranks per node as MPI sees it (MPI_COMM_TYPE_SHARED), the largest over the world. Collective.
int measure_ranks_per_node(const Communicator& world);

}  // namespace strata
