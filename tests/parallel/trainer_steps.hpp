// What the MPI tests of whole trainings share: training to an exact step, a replica's whole state
// assembled over its model shards, and a small training of two replicas.
#pragma once

#include <cstdint>

#include "core/config.hpp"
#include "core/trainer.hpp"
#include "parallel/planner.hpp"
#include "parallel/topology.hpp"
#include "tests/core/trainer_states.hpp"
#include "tests/parallel/whole_state.hpp"

namespace strata::testing {

// Trains until the global step reaches `step`, stopping at that step boundary.
inline void train_until(Trainer& trainer, std::int64_t step) {
  train_steps(trainer, step);
}

// A small CNN that two data-parallel replicas train (D = 2, local batch 16), and its plan.
inline Config two_replica_config() {
  return parse_config(R"(run: {name: h, seed: 4}
data:
  source: synthetic
  validation_fraction: 0.0
  synthetic: {train: 256, test: 32, classes: 4, channels: 1, height: 8, width: 8}
model:
  layers:
    - conv2d: {filters: 8, kernel: 3, init: glorot}
    - relu
    - flatten
    - dense: {units: 16, init: glorot}
    - relu
    - dense: {units: 4, init: glorot}
training: {epochs: 1, local_batch: 16, optimizer: {type: sgd, lr: 0.05, momentum: 0.9}}
parallel: {data: 2, max_global_batch: 32}
)",
                      "two_replicas.yaml");
}

inline Plan two_replica_plan() {
  PlanRequest request;
  request.world_size = 2;
  request.local_batch = 16;
  request.max_global_batch = 32;
  return make_plan(request);
}

// The whole state of a replica, as its checkpoint holds it: assembled over the model shards.
inline StateDict whole_state(Trainer& trainer, const Topology& topology) {
  StateDict local;
  trainer.save_state(local);
  return topology.plan().model > 1 ? gather_whole_state(local, topology.model()) : local;
}

}  // namespace strata::testing
