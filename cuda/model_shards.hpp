// The model-parallel layers' collectives on GPUs: NCCL over the M shards of one replica (the
// topology's `model` communicator), on the compute stream, under the watchdog.
#pragma once

#include "cuda/device_model.hpp"
#include "cuda/nccl_collectives.hpp"
#include "parallel/communicator.hpp"

namespace strata::cuda {

class NcclShardCollectives final : public ShardCollectives {
 public:
  // Collective over `shards` (see NcclCommunicator): every rank's GPU must be current.
  NcclShardCollectives(const Communicator& shards, NcclWatch watch)
      : nccl_(shards), watch_(std::move(watch)) {}

  int shard() const override { return nccl_.rank(); }
  int shards() const override { return nccl_.size(); }
  void sum(float* values, std::size_t count, const Stream& compute) override {
    nccl_.allreduce_sum(values, count, compute.get());
  }
  void allgather(const float* mine, float* all, std::size_t count, const Stream& compute) override {
    nccl_.allgather(mine, all, count, compute.get());
  }
  // A stall is reported every watch.report_s, and past watch.abort_s the NCCL communicator is
  // aborted and CudaError thrown.
  void wait(const Stream& compute) override {
    nccl_.wait(compute.get(), "the model-parallel layers' collectives", watch_);
  }

 private:
  NcclCommunicator nccl_;
  NcclWatch watch_;
};

}  // namespace strata::cuda
