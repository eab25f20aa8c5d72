#include "cuda/replica_sum.hpp"

namespace strata::cuda {

void NcclReplicaSum::layer_ready(std::span<const DeviceGradient> grads, const Stream& compute) {
  // The sums start once the compute stream has written these gradients, and run beside the
  // backward pass of the layers before.
  written_.order(compute, sums_);
  for (const DeviceGradient& g : grads) nccl_.allreduce_sum(g.values, g.count, sums_.get());
}

void NcclReplicaSum::finish(const Stream& /*compute*/) {
  // The host sees the sums complete before it enqueues anything more on the compute stream, so
  // nothing enqueued there afterwards can read a gradient before its sum.
  nccl_.wait(sums_.get(), "the gradient allreduce", watch_);
}

}  // namespace strata::cuda
