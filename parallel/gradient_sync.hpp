// Data-parallel gradient averaging: bucketed non-blocking allreduces that overlap the backward
// pass.
#pragma once

#include <cstddef>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/config.hpp"
#include "core/gradient_sync.hpp"
#include "core/trace.hpp"
#include "parallel/communicator.hpp"

namespace strata {

// Which gradients share a bucket: `sizes` (floats) in the order backward finishes them; returns
// each bucket's indices into `sizes`, in the order the buckets start. A gradient of 64 KiB or more
// is reduced in place in a bucket of its own; smaller ones are packed up to bucket_mib (0: every
// gradient alone). The cost model (step_cost.cpp) counts the same buckets.
std::vector<std::vector<std::size_t>> gradient_buckets(const std::vector<std::int64_t>& sizes,
                                                       double bucket_mib);

// Whether the group's gradients are summed through a shared window per node (HierarchicalSync)
// rather than by MPI allreduces, when its nodes hold `fewest` to `most` of its replicas. `auto`
// takes the window when every node holds the same number, at least 2: it then moves each
// gradient once in and once out, where MPI copies it into its buffers and back. The cost model
// (step_cost.cpp) decides by the same rule.
bool sums_through_window(AllreduceKind kind, int fewest, int most);

class DataParallelSync final : public GradientSync {
 public:
  // `data` must outlive this object. attach() must follow before the first step.
  DataParallelSync(const Communicator& data, double bucket_mib)
      : data_(data), bucket_mib_(bucket_mib) {}
  // The parameters whose gradients are averaged, in the model's (forward) order. Buckets are
  // filled in backward order, each up to bucket_mib MiB; 0 gives one allreduce per tensor.
  void attach(const std::vector<Param>& params);

  int replica() const override { return data_.rank(); }
  int replicas() const override { return data_.size(); }
  void gradients_ready(std::span<const Param> params) override;
  void finish() override;
  void sum(std::span<double> values) override;

  std::size_t bucket_count() const { return buckets_.size(); }
  // Records each bucket's allreduce, from its start to the end of its wait, on `trace`.
  void set_trace(Trace* trace) { trace_ = trace; }

 private:
  struct Bucket {
    std::vector<Tensor*> grads;  // in backward order
    std::vector<float>
        packed;             // the bucket's gradients back to back; empty for a one-tensor bucket
    std::size_t ready = 0;  // gradients written this step
    Request reduction;
    bool started = false;
    Trace::Clock::time_point started_at;
    std::string trace_name;  // "allreduce bucket 3 (1.2 MiB)"
  };
  void start(Bucket& bucket);

  const Communicator& data_;
  double bucket_mib_;
  std::vector<Bucket> buckets_;
  std::unordered_map<const Tensor*, std::size_t> bucket_of_;  // gradient -> its bucket
  Trace* trace_ = nullptr;
};

}  // namespace strata
