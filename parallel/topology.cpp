#include "parallel/topology.hpp"

#include <stdexcept>

#include <fmt/format.h>

namespace strata {

Topology::Topology(const Communicator& world, const Plan& plan)
    : world_(world), plan_(plan), world_rank_(world.rank()), coords_(plan.coords(world.rank())) {
  if (plan.world_size != world.size())
    throw std::invalid_argument(fmt::format("the plan is for {} ranks but the world has {}",
                                            plan.world_size, world.size()));
  const int M = plan.model, D = plan.data;
  const auto [g, d, m] = coords_;
  member_ = world.split(g, d * M + m, "member");
  data_ = world.split(g * M + m, d, "data");
  model_ = world.split(g * D + d, m, "model");
  peers_ = world.split(d * M + m, g, "peers");
  const int nodes = plan.node_of(plan.world_size - 1) + 1;
  data_node_ = world.split((g * M + m) * nodes + plan.node_of(world_rank_), d, "data_node");
  data_across_ =
      world.split((g * M + m) * D + data_node_.rank(), plan.node_of(world_rank_), "data_across");
}

int measure_ranks_per_node(const Communicator& world) {
  const Communicator node = world.split_shared("node");
  return world.allreduce_max(node.size());
}

}  // namespace strata
