// How a trainer combines gradients and statistics with other processes; parallel/ implements it
// over MPI.
#pragma once

#include <span>

#include "core/layer.hpp"

namespace strata {

// Data parallelism from the trainer's side. The trainer scales every replica's loss gradient by
// the global batch, so summing the gradients over the replicas gives the global-batch mean.
class GradientSync {
 public:
  virtual ~GradientSync() = default;
  // This process's replica index and the number of replicas.
  virtual int replica() const = 0;
  virtual int replicas() const = 0;
  // Backward has just written the gradients of `params` (calls come in backward order, and every
  // parameter comes exactly once per step): a bucket that is now full may start its reduction.
  virtual void gradients_ready(std::span<const Param> params) = 0;
  // Blocks until every gradient holds its sum over all replicas.
  virtual void finish() = 0;
  // Sums small per-process statistics (loss sums, correct counts) over the replicas, in place.
  virtual void sum(std::span<double> values) = 0;
};

}  // namespace strata
