#include "parallel/collective_cost.hpp"

#include <cmath>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/errors.hpp"

namespace strata {

namespace {

// Latency and sustained MPI bandwidth per node; intra-node figures are shared-memory MPI on the
// nodes these networks came with (docs/cost_model.md gives the sources).
NetworkCost aries() {
  return {"aries", LinkCost{0.4e-6, 10e9}, LinkCost{1.5e-6, 9e9}};
}
NetworkCost slingshot() {
  return {"slingshot", LinkCost{0.3e-6, 20e9}, LinkCost{2.0e-6, 22e9}};
}

double log2_ceil(int ranks) {
  return std::ceil(std::log2(static_cast<double>(ranks)));
}

}  // namespace

std::vector<std::string> network_preset_names() {
  return {"aries", "slingshot"};
}

NetworkCost network_preset(const std::string& name) {
  if (name == "aries") return aries();
  if (name == "slingshot") return slingshot();
  throw ConfigError(fmt::format("unknown network '{}': the presets are {}", name,
                                fmt::join(network_preset_names(), ", ")));
}

double allreduce_seconds(double bytes, int ranks, const LinkCost& link) {
  if (ranks < 2) return 0.0;
  const double p = ranks;
  return 2.0 * log2_ceil(ranks) * link.latency_s + 2.0 * (p - 1.0) / p * bytes / link.bytes_per_s;
}

double allgather_seconds(double total_bytes, int ranks, const LinkCost& link) {
  if (ranks < 2) return 0.0;
  const double p = ranks;
  return (p - 1.0) * link.latency_s + (p - 1.0) / p * total_bytes / link.bytes_per_s;
}

double hierarchical_allreduce_seconds(double bytes, int ranks_per_node, int nodes,
                                      const NetworkCost& network) {
  const double r = ranks_per_node;
  // Reduce-scatter and allgather inside the node: each moves (r-1)/r of the buffer per rank.
  const double inside = ranks_per_node < 2
                            ? 0.0
                            : 2.0 * ((r - 1.0) * network.intra_node.latency_s +
                                     (r - 1.0) / r * bytes / network.intra_node.bytes_per_s);
  // The r slices cross the NIC together, so together they cost what one whole buffer would.
  const double across = allreduce_seconds(bytes, nodes, network.inter_node);
  return inside + across;
}

}  // namespace strata
