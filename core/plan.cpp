#include "core/plan.hpp"

namespace strata {

RankCoords Plan::coords(int world_rank) const {
  return {world_rank / (model * data), (world_rank / model) % data, world_rank % model};
}

bool Plan::model_groups_within_nodes() const {
  for (int first = 0; first < world_size; first += model)
    if (node_of(first) != node_of(first + model - 1)) return false;
  return true;
}

}  // namespace strata
