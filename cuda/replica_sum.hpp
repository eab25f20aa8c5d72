// The data-parallel gradient sum of a model on GPUs: NCCL allreduces over the group's replicas on
// a stream of their own, each layer's started as soon as backward has enqueued its gradients.
#pragma once

#include "cuda/device_memory.hpp"
#include "cuda/device_model.hpp"
#include "cuda/nccl_collectives.hpp"
#include "parallel/communicator.hpp"

namespace strata::cuda {

class NcclReplicaSum final : public ReplicaGradientSum {
 public:
  // Collective over `replicas` (see NcclCommunicator): every rank's GPU must be current.
  NcclReplicaSum(const Communicator& replicas, NcclWatch watch)
      : nccl_(replicas), watch_(std::move(watch)) {}

  void layer_ready(std::span<const DeviceGradient> grads, const Stream& compute) override;
  // Waits for the sums under the watch: a stall is reported, and past watch.abort_s the NCCL
  // communicator is aborted and CudaError thrown.
  void finish(const Stream& compute) override;

 private:
  NcclCommunicator nccl_;
  NcclWatch watch_;
  Stream sums_;
  Event written_;
};

}  // namespace strata::cuda
