#include "parallel/step_cost.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "core/measurement.hpp"
#include "parallel/gradient_sync.hpp"

namespace strata {

namespace {

constexpr double float_bytes = sizeof(float);

// A split layer's tensor on one of M shards: a row split keeps its whole bias.
std::int64_t shard_size(const LayerTiming& layer, std::size_t tensor, int shards) {
  const std::int64_t size = layer.tensors[tensor];
  if (layer.split == SplitKind::none || shards < 2) return size;
  if (layer.split == SplitKind::row && tensor > 0) return size;
  return size / shards;
}

// Activations gathered and summed over the M shards in one micro-batch's forward and backward.
double model_parallel_seconds(const Calibration& c, int shards, const LinkCost& link) {
  if (shards < 2) return 0.0;
  const double batch = c.local_batch;
  double seconds = 0.0;
  for (const LayerTiming& layer : c.layers) {
    const double out = batch * static_cast<double>(layer.output_elements) * float_bytes;
    const double in = batch * static_cast<double>(layer.input_elements) * float_bytes;
    if (layer.split == SplitKind::row) seconds += allreduce_seconds(out, shards, link);
    if (layer.split != SplitKind::column) continue;
    if (layer.gathers_output) seconds += allgather_seconds(out, shards, link);
    if (layer.needs_input_gradient) seconds += allreduce_seconds(in, shards, link);
  }
  return seconds;
}

// A step's compute on one thread with the split layers' share for M shards: the micro-batch's
// forward, backward and reads, and the optimizer step.
struct OneThreadCompute {
  double micro_s = 0.0, optimizer_s = 0.0;
};

OneThreadCompute one_thread_compute(const Calibration& c, int shards) {
  OneThreadCompute out{c.one_thread_step_s() - c.optimizer_s, c.optimizer_s};
  if (shards < 2) return out;
  double split_parameters = 0.0;
  double split_layers_s = 0.0;
  for (const LayerTiming& layer : c.layers) {
    if (layer.split == SplitKind::none) continue;
    split_layers_s += layer.forward_s + layer.backward_s;
    for (std::size_t t = 0; t < layer.tensors.size(); ++t)
      split_parameters += static_cast<double>(layer.tensors[t] - shard_size(layer, t, shards));
  }
  const double all = static_cast<double>(std::max<std::int64_t>(1, c.parameters()));
  out.optimizer_s -= c.optimizer_s * split_parameters / all;
  // From the layers' own times: the unsplit step less the split layers' (1 - 1/M).
  const double from_layers = out.micro_s - split_layers_s * (1.0 - 1.0 / shards);
  if (c.split_step_s > 0.0 && c.intra_node) {
    // Measured at M = 2, less the collectives the model adds back for the plan's M and link: what
    // remains is compute and the split layers' copies; their compute share moves from 1/2 to 1/M.
    // The split step carries copies the layer times lack, so it is the larger where both are
    // sound; a calibration taken on a busy node can measure MPI latencies longer than the split
    // step itself, and then the layer times are the estimate left.
    const double from_split_step = c.split_step_s - c.split_optimizer_s -
                                   model_parallel_seconds(c, 2, *c.intra_node) +
                                   split_layers_s * (1.0 / shards - 0.5);
    out.micro_s = std::max(from_split_step, from_layers);
  } else {
    out.micro_s = from_layers;
  }
  return out;
}

// How much faster a step runs on `threads` workers than on one: measured where calibrated, ideal
// beyond the largest thread count measured.
double thread_speedup(const Calibration& c, int threads) {
  const StepTiming* best = &c.steps.front();
  for (const StepTiming& s : c.steps)
    if (s.threads <= threads) best = &s;
  const double measured = c.steps.front().step_s / best->step_s;
  return measured * static_cast<double>(threads) / best->threads;
}

// The gradient buckets' bytes on one of M shards, formed as DataParallelSync forms them.
std::vector<double> bucket_bytes(const Calibration& c, int shards) {
  std::vector<std::int64_t> sizes;  // backward order: last layer first, bias before weight
  for (auto layer = c.layers.rbegin(); layer != c.layers.rend(); ++layer)
    for (std::size_t t = layer->tensors.size(); t-- > 0;)
      sizes.push_back(shard_size(*layer, t, shards));
  std::vector<double> bytes;
  for (const auto& members : gradient_buckets(sizes, c.bucket_mib)) {
    double sum = 0.0;
    for (std::size_t i : members) sum += static_cast<double>(sizes[i]) * float_bytes;
    bytes.push_back(sum);
  }
  return bytes;
}

// How much slower a rank steps while all of the calibrated node's ranks step as the plan runs
// them than alone: split into pairs (M = 2), as pairs of replicas (D = 2), or as members on
// `threads` each. Factor 0 where the calibration did not measure that: another node, another rank
// count, another thread count. A pair's steps hold its collectives, so their slowdown covers them.
struct SharedSlowdown {
  double factor = 0.0;
  const char* measured_as = "";
  bool covers_model_parallel = false, covers_data_parallel = false;
  // Of the steps measured, where they were taken independently; null for the replica pairs,
  // whose steps held the wait for each other.
  const std::vector<double>* spread = nullptr;
};

SharedSlowdown shared_slowdown(const Calibration& c, const Plan& plan,
                               const PredictionSettings& settings, int ranks_on_node, int threads) {
  if (!settings.calibrated_node || settings.cores_per_node != c.cores ||
      ranks_on_node != c.intra_node_ranks || c.one_thread_step_s() <= 0.0)
    return {};
  // On 2 ranks the split step is itself the node's ranks stepping as a pair of shards.
  const bool pair_fills_node = c.intra_node_ranks == 2;
  const double shard_pairs = pair_fills_node ? c.split_step_s : c.shared_split_step_s;
  const auto& shard_pairs_spread = pair_fills_node ? c.split_spread : c.shared_split_spread;
  if (plan.model == 2 && shard_pairs > 0.0 && c.split_step_s > 0.0)
    return {shard_pairs / c.split_step_s, "shard pairs", true, false, &shard_pairs_spread};
  // The pairs summed once per micro-batch: with K > 1 their sums would count K times.
  const auto& pairs = c.replica_pairs_step;
  if (plan.model == 1 && plan.data == 2 && plan.accumulate == 1 && pairs &&
      pairs->threads == threads)
    return {pairs->step_s / c.step_alone_s(threads), "replica pairs", false, true};
  for (const StepTiming& s : c.shared_steps)
    if (s.threads == threads)
      return {s.step_s / c.step_alone_s(threads), "members", false, false, &s.spread};
  return {};
}

// The spread of a step of `micro_batches` micro-batches from that of one-micro-batch steps: the
// replicas wait once per step, and a sum of K independent micro-batches spreads 1/sqrt(K) as
// widely about its mean.
std::vector<double> over_micro_batches(const std::vector<double>& spread, int micro_batches) {
  const double centre = mean(spread);
  std::vector<double> out = spread;
  const double narrowing = 1.0 / std::sqrt(static_cast<double>(std::max(1, micro_batches)));
  for (double& x : out) x = centre + (x - centre) * narrowing;
  return out;
}

}  // namespace

double expected_slowest(const std::vector<double>& spread, int draws) {
  if (spread.empty() || draws < 2) return 1.0;
  std::vector<double> sorted = spread;
  std::sort(sorted.begin(), sorted.end());
  // The largest of `draws` is point i when all draws fall at or below it and not all below:
  // ((i + 1)^draws - i^draws) / n^draws.
  const auto n = static_cast<double>(sorted.size());
  double expected = 0.0;
  for (std::size_t i = 0; i < sorted.size(); ++i) {
    const auto at = static_cast<double>(i);
    expected += sorted[i] * (std::pow((at + 1.0) / n, draws) - std::pow(at / n, draws));
  }
  const double average = mean(sorted);
  return average > 0.0 ? expected / average : 1.0;
}

std::int64_t Calibration::parameters() const {
  std::int64_t total = 0;
  for (const LayerTiming& layer : layers)
    total += std::accumulate(layer.tensors.begin(), layer.tensors.end(), std::int64_t{0});
  return total;
}

double Calibration::one_thread_step_s() const {
  return steps.empty() ? 0.0 : steps.front().step_s;
}

double Calibration::step_alone_s(int threads) const {
  return one_thread_step_s() / thread_speedup(*this, threads);
}

StepCost predict_step(const Calibration& c, const Plan& plan, const PredictionSettings& settings) {
  if (c.local_batch != plan.local_batch)
    throw ConfigError(fmt::format(
        "the calibration was measured at local batch {}, the plan trains local batch {}: run "
        "strata calibrate again for this config",
        c.local_batch, plan.local_batch));
  if (c.steps.empty() || c.steps.front().threads != 1)
    throw ConfigError("the calibration has no one-thread step time");
  StepCost cost;
  const int ranks_on_node = std::min(plan.ranks_per_node, plan.world_size);
  cost.threads = settings.threads > 0 ? settings.threads
                                      : share_of_cores(settings.cores_per_node, ranks_on_node);
  if (plan.model > 1) cost.threads = 1;  // as strata run: only the main thread calls MPI
  cost.oversubscription =
      std::max(1.0, static_cast<double>(ranks_on_node) * cost.threads / settings.cores_per_node);

  // This node's ranks measured stepping together as the plan runs them: their slowdown against
  // one rank alone replaces the division of the cores.
  const SharedSlowdown measured = shared_slowdown(c, plan, settings, ranks_on_node, cost.threads);
  cost.slowdown_measured = measured.factor > 0.0;
  // Ranks measured stepping on their own wait, in the plan, for the slowest of those they sum
  // with: the D replicas, and where members stand in for shards the D x M ranks (at least: the
  // shards meet at every split layer).
  if (measured.spread != nullptr) {
    const int peers = measured.covers_model_parallel ? plan.data : plan.data * plan.model;
    cost.waits_for = peers;
    cost.slowest_replica =
        expected_slowest(over_micro_batches(*measured.spread, plan.accumulate), peers);
  }
  cost.compute_slowdown =
      cost.slowdown_measured ? measured.factor * cost.slowest_replica : cost.oversubscription;
  cost.measured_as = measured.measured_as;

  // K micro-batches of forward, backward and reads, then one optimizer step.
  const OneThreadCompute one = one_thread_compute(c, plan.model);
  cost.compute_s = (plan.accumulate * one.micro_s + one.optimizer_s) /
                   thread_speedup(c, cost.threads) * cost.compute_slowdown;

  const LinkCost& shard_link =
      plan.model_groups_within_nodes() ? settings.network.intra_node : settings.network.inter_node;
  cost.model_parallel_s = plan.accumulate * model_parallel_seconds(c, plan.model, shard_link);
  if (measured.covers_model_parallel) cost.model_parallel_s *= cost.compute_slowdown;

  if (plan.data > 1) {
    // Replicas of one group on a node, and the nodes the group spans.
    const int per_node = std::clamp(plan.ranks_per_node / plan.model, 1, plan.data);
    const int nodes = (plan.data + per_node - 1) / per_node;
    // Every shard of a replica runs its own data-parallel sum at the same time, and across nodes
    // all of a node's ranks share its link.
    const int shards_on_node = std::clamp(plan.ranks_per_node, 1, plan.model);
    const bool window =
        sums_through_window(settings.allreduce, plan.data - (nodes - 1) * per_node, per_node);
    NetworkCost network = settings.network;
    network.inter_node.bytes_per_s /= shards_on_node * (window ? 1 : per_node);
    const LinkCost& link = nodes > 1 ? network.inter_node : network.intra_node;
    if (window) {
      // One sum of every gradient per step through the node's window (HierarchicalSync has no
      // buckets), and the step's sums over MPI.
      double bytes = 0.0;
      for (double bucket : bucket_bytes(c, plan.model)) bytes += bucket;
      cost.data_parallel_s = hierarchical_allreduce_seconds(bytes, per_node, nodes, network);
    } else {
      // MPICH advances a non-blocking allreduce only inside MPI calls, and backward makes none
      // between layers: the buckets' reductions are counted whole, none hidden behind backward.
      for (double bucket : bucket_bytes(c, plan.model))
        cost.data_parallel_s += allreduce_seconds(bucket, plan.data, link);
    }
    cost.data_parallel_s += allreduce_seconds(2 * sizeof(double), plan.data, link);
  }
  if (measured.covers_data_parallel) cost.data_parallel_s = 0.0;
  cost.step_s = cost.compute_s + cost.model_parallel_s + cost.data_parallel_s;
  cost.samples_per_s = plan.global_batch() / cost.step_s;
  cost.total_samples_per_s = cost.samples_per_s * plan.groups;
  return cost;
}

}  // namespace strata
