// What the MPI tests of whole trainings share: training to an exact step, and a replica's whole
// state assembled over its model shards.
#pragma once

#include <cstdint>

#include "core/trainer.hpp"
#include "parallel/state_gather.hpp"
#include "parallel/topology.hpp"

namespace strata::testing {

struct StopHere {};

// Trains until the global step reaches `step`, stopping at that step boundary.
inline void train_until(Trainer& trainer, std::int64_t step) {
  trainer.set_step_hook([&] {
    if (trainer.position().global_step == step) throw StopHere{};
  });
  try {
    while (true) trainer.run_epoch({});
  } catch (const StopHere&) {
  }
}

// The whole state of a replica as strata run builds it, assembled over the model shards.
inline StateDict whole_state(Trainer& trainer, const Topology& topology) {
  StateDict local;
  trainer.save_state(local);
  return topology.plan().model > 1 ? gather_whole_state(local, topology.model()) : local;
}

}  // namespace strata::testing
