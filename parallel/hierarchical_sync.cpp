#include "parallel/hierarchical_sync.hpp"

#include <algorithm>
#include <stdexcept>

#include <fmt/format.h>

namespace strata {

HierarchicalSync::HierarchicalSync(const Communicator& data, const Communicator& node,
                                   const Communicator& across)
    : data_(data), node_(node), across_(across) {
  const int fewest = data.allreduce_min(node.size()), most = data.allreduce_max(node.size());
  if (fewest != most)
    throw std::invalid_argument(fmt::format(
        "parallel.allreduce: hierarchical needs as many data-parallel replicas on every node, but "
        "nodes hold {} to {} of the {}; use parallel.allreduce: mpi",
        fewest, most, data.size()));
}

void HierarchicalSync::attach(const std::vector<Param>& params) {
  total_ = 0;
  for (const Param& p : params) total_ += static_cast<std::size_t>(p.grad->size());
  const auto ranks = static_cast<std::size_t>(node_.size());
  chunk_ = (total_ + ranks - 1) / ranks;
  // This rank's gradients, then its slice of the sum.
  window_.emplace(node_, total_ + chunk_);
  const std::span<float> mine = window_->segment(node_.rank());
  std::size_t at = 0;
  for (const Param& p : params) {
    const auto size = static_cast<std::size_t>(p.grad->size());
    p.grad->bind(mine.subspan(at, size));
    at += size;
  }
  expected_ = params.size();
  ready_ = 0;
  trace_name_ = fmt::format("hierarchical allreduce ({:.2f} MiB)",
                            static_cast<double>(total_) * sizeof(float) / (1 << 20));
}

void HierarchicalSync::gradients_ready(std::span<const Param> params) {
  ready_ += params.size();
}

void HierarchicalSync::finish() {
  if (ready_ != expected_)
    throw std::logic_error(
        fmt::format("hierarchical sync: {} of the {} gradients were reported before finish()",
                    ready_, expected_));
  ready_ = 0;
  const auto start = Trace::Clock::now();
  const int ranks = node_.size(), me = node_.rank();
  const std::size_t first = std::min(static_cast<std::size_t>(me) * chunk_, total_);
  const std::size_t count = std::min(first + chunk_, total_) - first;
  window_->fence();  // every rank's gradients are written
  // This rank's slice of the node's sum, in node-rank order: the same on every run.
  float* slice = window_->segment(me).data() + total_;
  const float* g0 = window_->segment(0).data() + first;
  if (ranks == 1) {
    std::copy(g0, g0 + count, slice);
  } else {
    // The first two in one pass: memory traffic, not arithmetic, is what this costs.
    const float* g1 = window_->segment(1).data() + first;
    for (std::size_t i = 0; i < count; ++i) slice[i] = g0[i] + g1[i];
  }
  for (int q = 2; q < ranks; ++q) {
    const float* g = window_->segment(q).data() + first;
    for (std::size_t i = 0; i < count; ++i) slice[i] += g[i];
  }
  if (across_.size() > 1) across_.allreduce_sum(std::span<float>(slice, count));
  window_->fence();  // every slice is summed
  float* mine = window_->segment(me).data();
  for (int q = 0; q < ranks; ++q) {
    const std::size_t at = std::min(static_cast<std::size_t>(q) * chunk_, total_);
    const std::size_t n = std::min(at + chunk_, total_) - at;
    const float* sum = window_->segment(q).data() + total_;
    std::copy(sum, sum + n, mine + at);
  }
  // No rank writes a slice again before the next finish()'s first fence, which waits for every
  // rank to have copied this one.
  if (trace_ != nullptr) trace_->complete(trace_name_, "comm", start);
}

}  // namespace strata
