#include "parallel/gradient_sync.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace strata {

// A gradient this large is reduced in place in a bucket of its own: copying it into and out of a
// packed buffer costs more than the latency of its own message (shared-memory allreduce runs at
// memory speed). Smaller ones are packed together, up to bucket_mib.
constexpr std::int64_t in_place_floats = (64 << 10) / sizeof(float);

bool sums_through_window(AllreduceKind kind, int fewest, int most) {
  switch (kind) {
    case AllreduceKind::mpi:
    case AllreduceKind::nccl:  // on the GPUs; the host sync only sums statistics
      return false;
    case AllreduceKind::hierarchical:
      return true;
    case AllreduceKind::automatic:
      return fewest == most && fewest >= 2;
  }
  return false;
}

std::vector<std::vector<std::size_t>> gradient_buckets(const std::vector<std::int64_t>& sizes,
                                                       double bucket_mib) {
  const auto limit = static_cast<std::int64_t>(bucket_mib * (1 << 20) / sizeof(float));
  std::vector<std::vector<std::size_t>> buckets;
  std::int64_t filled = 0;
  std::size_t packing = 0;  // the bucket small gradients go to; meaningful while filled > 0
  for (std::size_t i = 0; i < sizes.size(); ++i) {
    if (limit == 0 || sizes[i] >= in_place_floats) {
      buckets.push_back({i});
      continue;
    }
    if (filled == 0 || filled + sizes[i] > limit) {
      buckets.emplace_back();
      packing = buckets.size() - 1;
      filled = 0;
    }
    buckets[packing].push_back(i);
    filled += sizes[i];
  }
  return buckets;
}

void DataParallelSync::attach(const std::vector<Param>& params) {
  buckets_.clear();
  bucket_of_.clear();
  std::vector<Tensor*> backward_order;
  std::vector<std::int64_t> sizes;
  for (auto p = params.rbegin(); p != params.rend(); ++p) {
    backward_order.push_back(p->grad);
    sizes.push_back(p->grad->size());
  }
  for (const auto& members : gradient_buckets(sizes, bucket_mib_)) {
    buckets_.emplace_back();
    for (std::size_t i : members) {
      buckets_.back().grads.push_back(backward_order[i]);
      bucket_of_[backward_order[i]] = buckets_.size() - 1;
    }
  }
  for (std::size_t k = 0; k < buckets_.size(); ++k) {
    Bucket& b = buckets_[k];
    std::int64_t total = 0;
    for (const Tensor* g : b.grads) total += g->size();
    b.trace_name = fmt::format("allreduce bucket {} ({:.2f} MiB)", k,
                               static_cast<double>(total) * sizeof(float) / (1 << 20));
    if (b.grads.size() < 2) continue;
    b.packed.resize(static_cast<std::size_t>(total));
  }
}

void DataParallelSync::start(Bucket& b) {
  if (trace_ != nullptr) b.started_at = Trace::Clock::now();
  if (b.packed.empty()) {
    b.reduction = data_.iallreduce_sum(*b.grads.front());
  } else {
    float* at = b.packed.data();
    for (const Tensor* g : b.grads) at = std::copy(g->values().begin(), g->values().end(), at);
    b.reduction = data_.iallreduce_sum(std::span<float>(b.packed));
  }
  b.started = true;
}

void DataParallelSync::gradients_ready(std::span<const Param> params) {
  for (const Param& p : params) {
    const auto found = bucket_of_.find(p.grad);
    if (found == bucket_of_.end())
      throw std::logic_error(
          fmt::format("gradient sync: {} is not one of the model's parameters", p.name));
    Bucket& b = buckets_[found->second];
    // Every rank reports the same layers in the same order, so the buckets start in the same order
    // everywhere, as MPI requires of non-blocking collectives.
    if (++b.ready == b.grads.size()) start(b);
  }
}

void DataParallelSync::finish() {
  for (auto& b : buckets_) {
    if (!b.started)
      throw std::logic_error(
          fmt::format("gradient sync: a bucket got {} of its {} gradients before finish()", b.ready,
                      b.grads.size()));
    b.reduction.wait();
    if (trace_ != nullptr) trace_->complete(b.trace_name, "comm", b.started_at);
    if (!b.packed.empty()) {
      const float* at = b.packed.data();
      for (Tensor* g : b.grads) {
        std::copy(at, at + g->size(), g->values().begin());
        at += g->size();
      }
    }
    b.ready = 0;
    b.started = false;
  }
}

void DataParallelSync::sum(std::span<double> values) {
  data_.allreduce_sum(values);
}

}  // namespace strata
