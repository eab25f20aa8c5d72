// The alpha-beta cost of the collectives strata calls, per network level, for the cost model of
// `strata plan --predict`.
#pragma once

#include <string>
#include <vector>

namespace strata {

// One network level: a message of n bytes costs latency_s + n / bytes_per_s.
struct LinkCost {
  double latency_s = 0.0;
  double bytes_per_s = 1.0;

  bool operator==(const LinkCost&) const = default;
};

// Two levels: between ranks of one node, and between nodes (one NIC per node).
struct NetworkCost {
  std::string name;
  LinkCost intra_node;
  LinkCost inter_node;
};

// The named presets: "aries" (Cray XC), "slingshot" (HPE Cray EX), with figures that
// docs/cost_model.md states and sources. Throws ConfigError naming the known ones.
NetworkCost network_preset(const std::string& name);
std::vector<std::string> network_preset_names();

// MPI_Allreduce of `bytes` over `ranks` as MPICH does large ones (Rabenseifner: a reduce-scatter
// and an allgather by recursive halving and doubling): 2 log2(p) latencies, and every rank sends
// and receives 2 (p-1)/p of the buffer.
double allreduce_seconds(double bytes, int ranks, const LinkCost& link);

// MPI_Allgather of a `total_bytes` result (each rank brings total/p) over `ranks`, as a ring.
double allgather_seconds(double total_bytes, int ranks, const LinkCost& link);

// The hierarchical allreduce (parallel/hierarchical_sync.hpp) over `nodes` x `ranks_per_node`
// ranks: a reduce-scatter and an allgather inside each node on the intra-node link, and between
// them an allreduce of each rank's 1/r slice across nodes, all r slices sharing the node's NIC.
double hierarchical_allreduce_seconds(double bytes, int ranks_per_node, int nodes,
                                      const NetworkCost& network);

}  // namespace strata
