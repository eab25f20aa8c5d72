// A member group's training built for this rank's place in the topology: its gradient sync, its
// device and its trainer.
#pragma once

#include <memory>
#include <optional>
#include <string>

#include "core/config.hpp"
#include "core/trace.hpp"
#include "core/trainer.hpp"
#include "core/training_data.hpp"
#include "parallel/gradient_sync.hpp"
#include "parallel/hierarchical_sync.hpp"
#include "parallel/topology.hpp"

namespace strata {

// A trainer for this rank's place in the topology: model-parallel layers when the plan has M > 1,
// a gradient sync over the `data` communicator when D > 1 (attached to the parameters that learn).
// Not movable: the trainer keeps a pointer to the sync beside it.
struct GroupTraining {
  // `trace` (null: off) records the trainer's and the gradient sync's events.
  GroupTraining(const Config& config, const TrainingData& data, const Topology& topology,
                const Plan& plan, int threads, Trace* trace = nullptr);
  GroupTraining(const GroupTraining&) = delete;
  GroupTraining& operator=(const GroupTraining&) = delete;

  // One of them when D > 1, as parallel.allreduce says.
  std::optional<DataParallelSync> sync;
  std::optional<HierarchicalSync> shared_sync;
  // The forward and backward passes on this rank's GPU, when run.device takes one (declared
  // before the trainer, which uses it until it is destroyed).
  std::unique_ptr<GradientEngine> gpu;
  std::optional<Trainer> trainer;
};

// Where a stage's trainings run, as this rank's node sees it, for the stage's first console line:
// "on the CPU", or "on GPUs (run.device auto; this node: 1 CUDA GPU(s) visible (NVIDIA H200))".
// Never fails (run.device cuda without a GPU fails when the training is built).
std::string trainings_device(const Config& config);

}  // namespace strata
