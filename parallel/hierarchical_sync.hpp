// Data-parallel gradient sums through shared memory (parallel.allreduce: hierarchical): the
// gradients live in an MPI-3 window on each node, so backward writes them where the node's other
// ranks read them; each rank of a node sums its slice over the node's ranks and writes the sum into
// every rank's gradients in place (one allreduce per slice goes across nodes first). After
// Horovod's hierarchical allreduce, without the NCCL.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "core/gradient_sync.hpp"
#include "core/trace.hpp"
#include "parallel/communicator.hpp"
#include "parallel/shared_window.hpp"

namespace strata {

class HierarchicalSync final : public GradientSync {
 public:
  // `data`: the replicas; `node`: those on this rank's node; `across`: one per node with this
  // rank's index on its node (Topology's data, data_node and data_across). They must outlive this
  // object. Collective over `data`: throws std::invalid_argument on every rank when nodes hold
  // different numbers of replicas (the slices would not line up).
  HierarchicalSync(const Communicator& data, const Communicator& node, const Communicator& across);
  // Binds every gradient of `params` into this rank's segment of a new shared window, one after
  // the other (collective over the node). Must come before the first step.
  void attach(const std::vector<Param>& params);

  int replica() const override { return data_.rank(); }
  int replicas() const override { return data_.size(); }
  // Counts them: the sum runs in finish(), once every gradient is written.
  void gradients_ready(std::span<const Param> params) override;
  void finish() override;
  void sum(std::span<double> values) override { data_.allreduce_sum(values); }
  void set_trace(Trace* trace) { trace_ = trace; }

 private:
  const Communicator& data_;
  const Communicator& node_;
  const Communicator& across_;
  std::optional<SharedWindow> window_;
  std::size_t total_ = 0;  // floats of all gradients
  std::size_t chunk_ = 0;  // each node rank's slice: ceil(total / node ranks)
  std::size_t expected_ = 0, ready_ = 0;
  std::vector<float*> slices_;  // this rank's slice in every node rank's segment, in rank order
  std::string trace_name_;
  Trace* trace_ = nullptr;
};

}  // namespace strata
