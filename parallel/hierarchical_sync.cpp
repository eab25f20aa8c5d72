#include "parallel/hierarchical_sync.hpp"

#include <algorithm>
#include <array>
#include <span>
#include <stdexcept>

#include <fmt/format.h>

namespace strata {
namespace {

// Sums count floats at each of `grads` (one pointer per rank of the node, summed in rank order so
// that the result does not depend on which rank computes it) and writes the sum to each of
// `targets`, block by block, so that each element is read once from each rank and written once to
// each target.
void sum_slices(std::span<float* const> grads, std::span<float* const> targets, std::size_t count) {
  constexpr std::size_t block = 1024;  // a block of sums stays in L1 between the reads and writes
  std::array<float, block> sums{};
  for (std::size_t at = 0; at < count; at += block) {
    const std::size_t n = std::min(block, count - at);
    std::copy(grads[0] + at, grads[0] + at + n, sums.begin());
    for (std::size_t q = 1; q < grads.size(); ++q) {
      const float* g = grads[q] + at;
      for (std::size_t i = 0; i < n; ++i) sums[i] += g[i];
    }
    for (float* t : targets)
      std::copy(sums.begin(), sums.begin() + static_cast<std::ptrdiff_t>(n), t + at);
  }
}

}  // namespace

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
  window_.emplace(node_, total_);
  const std::span<float> mine = window_->segment(node_.rank());
  std::size_t at = 0;
  for (const Param& p : params) {
    const auto size = static_cast<std::size_t>(p.grad->size());
    p.grad->bind(mine.subspan(at, size));
    at += size;
  }
  // This rank's slice of every rank's gradients: fixed while the window lives.
  const std::size_t first = std::min(static_cast<std::size_t>(node_.rank()) * chunk_, total_);
  slices_.clear();
  for (int q = 0; q < node_.size(); ++q) slices_.push_back(window_->segment(q).data() + first);
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
  // This rank sums its slice over the node's ranks, in node-rank order (the same on every run),
  // and writes the sum into every rank's gradients in place: one read and one write of each
  // gradient in all, where summing into a buffer and copying it back costs half as much again.
  const std::span<float* const> grads = slices_;
  float* const mine = grads[static_cast<std::size_t>(me)];
  if (across_.size() == 1) {
    if (ranks > 1) sum_slices(grads, grads, count);
  } else {
    if (ranks > 1) sum_slices(grads, std::span<float* const>(&mine, 1), count);
    across_.allreduce_sum(std::span<float>(mine, count));
    for (float* g : grads)
      if (g != mine) std::copy(mine, mine + count, g);
  }
  window_->fence();  // every slice is summed, on every rank
  // No rank writes its gradients again before the next finish()'s first fence, which every rank
  // reaches only after its optimizer step has read them.
  if (trace_ != nullptr) trace_->complete(trace_name_, "comm", start);
}

}  // namespace strata
