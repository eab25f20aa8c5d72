#include "cuda/replica_sum.hpp"

#include <utility>
#include <vector>

namespace strata::cuda {

void NcclReplicaSum::layer_ready(std::span<const DeviceGradient> grads, const Stream& compute) {
  // The sums start once the compute stream has written these gradients, and run beside the
  // backward pass of the layers before.
  written_.order(compute, sums_);
  std::vector<std::pair<float*, std::size_t>> buffers;
  for (const DeviceGradient& g : grads) buffers.emplace_back(g.values, g.count);
  nccl_.allreduce_sum_group(buffers, sums_.get());
}

void NcclReplicaSum::finish(const Stream& compute) {
  // This rank's own forward and backward first, without a limit: the watch is for the sums, and
  // a long step is no stall.
  compute.synchronize();
  // The host sees the sums complete before it enqueues anything more on the compute stream, so
  // nothing enqueued there afterwards can read a gradient before its sum.
  nccl_.wait(sums_.get(), "the gradient allreduce", watch_);
}

}  // namespace strata::cuda
