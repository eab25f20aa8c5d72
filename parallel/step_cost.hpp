// The cost model of one optimizer step: compute from the per-layer times `strata calibrate`
// measured on one rank, communication from the alpha-beta costs of the collectives the step makes
// (data-parallel gradient allreduce, model-parallel activations), for any plan G x D x M.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "core/config.hpp"
#include "core/plan.hpp"
#include "parallel/collective_cost.hpp"

namespace strata {

// One layer as calibrated: its times at the calibration's local batch on one thread, and what a
// model-parallel split of it sends.
struct LayerTiming {
  std::string name;
  std::string kind;  // "conv2d", "dense", "relu", ...
  SplitKind split = SplitKind::none;
  bool gathers_output = false;  // a column split not feeding a row split: its output is gathered
  bool needs_input_gradient = true;   // false for the first layer that learns
  std::vector<std::int64_t> tensors;  // each parameter tensor's size (weight, bias), in order
  std::int64_t input_elements = 0, output_elements = 0;  // per sample
  double forward_s = 0.0, backward_s = 0.0;              // per step

  bool operator==(const LayerTiming&) const = default;
};

// A whole training step (no communication) at a number of worker threads.
struct StepTiming {
  int threads = 1;
  double step_s = 0.0;
  // The steps' spread: each step over the mean, at evenly spaced quantiles (ascending); empty
  // where not measured. Ranks that sum gradients each step wait for the slowest of them, which the
  // mean alone does not show.
  std::vector<double> spread;

  bool operator==(const StepTiming&) const = default;
};

// What `strata calibrate` measured on this machine (calibration.json).
struct Calibration {
  std::string config;  // the config file it was measured for
  std::string cpu;
  int cores = 1;  // the cores the calibrating rank could use
  int local_batch = 1;
  double bucket_mib = 25.0;  // parallel.bucket_mib of the config
  std::vector<LayerTiming> layers;
  double data_s = 0.0;            // reading one local batch, per step, one thread
  double optimizer_s = 0.0;       // the optimizer step, one thread
  std::vector<StepTiming> steps;  // ascending threads, 1 first
  // Measured with MPI_Allreduce between ranks of this node when calibrated on 2 or more ranks.
  std::optional<LinkCost> intra_node;
  int intra_node_ranks = 0;
  // A one-thread step of a replica split over 2 ranks of this node (its model-parallel layers'
  // copies and collectives included), and its optimizer part; 0 when not measured (one rank, or
  // no split layers).
  double split_step_s = 0.0, split_optimizer_s = 0.0;
  std::vector<double> split_spread;  // of the split step's single steps, as StepTiming::spread
  // The same split step while every pair of the launch's ranks steps split at once (an even
  // count of 4 or more); 0 when not measured. Against split_step_s it carries what the
  // model-parallel ranks of a full node cost each other: the cores, and MPICH's polling in their
  // collectives.
  double shared_split_step_s = 0.0;
  std::vector<double> shared_split_spread;  // as StepTiming::spread
  // Steps on each of the intra_node_ranks ranks while all of them step, on one thread and on the
  // rank's share of the cores; empty when not measured. They carry what sharing the node costs
  // (memory bandwidth, caches, and past one rank per core the time slicing), which dividing the
  // cores among the ranks does not show.
  std::vector<StepTiming> shared_steps;
  // A step of pairs of data-parallel replicas (D = 2, their gradient sums included) on every rank
  // of the launch at once, on each rank's share of the cores; absent when not measured.
  std::optional<StepTiming> replica_pairs_step;

  std::int64_t parameters() const;
  // A whole step on one thread, communication excluded.
  double one_thread_step_s() const;
  // A whole step on `threads` workers with the node to itself: measured where calibrated, else
  // scaled ideally from the largest thread count measured below it.
  double step_alone_s(int threads) const;

  bool operator==(const Calibration&) const = default;
};

struct PredictionSettings {
  NetworkCost network;
  // The plan runs on the calibrated node (--network local): where the calibration ran as many ranks
  // as the plan puts on the node, on as many cores, their shared step replaces the division of the
  // cores.
  bool calibrated_node = false;
  int cores_per_node = 1;
  int threads = 0;  // worker threads per rank; 0 = as strata run chooses (its share of the cores)
  AllreduceKind allreduce = AllreduceKind::mpi;  // parallel.allreduce
};

// One member group's optimizer step, and what the G groups do together.
struct StepCost {
  int threads = 1;
  double oversubscription = 1.0;  // ranks x threads over the node's cores, when above 1
  // What compute was slowed by: the oversubscription, or as measured with the calibrated node's
  // ranks all stepping (slowdown_measured); a measurement of shard pairs slows their
  // model-parallel collectives by as much.
  double compute_slowdown = 1.0;
  bool slowdown_measured = false;
  // Which measurement: "members", "replica pairs" (their gradient sums included, so that
  // data_parallel_s is 0) or "shard pairs" (their collectives included).
  std::string measured_as;
  // Part of compute_slowdown: the D replicas of a group (D x M ranks where members stand in for
  // shards), measured stepping independently, wait each step for the slowest of them; the
  // expected slowest of those draws from the measured steps' spread (narrowed for K micro-batches
  // a step) over its mean. 1 where there is one, the measurement held the sums, or no spread was
  // measured.
  double slowest_replica = 1.0;
  int waits_for = 1;       // the ranks (replicas, or replicas x shards) whose slowest that is
  double compute_s = 0.0;  // K micro-batches forward and backward, data reads, optimizer
  double model_parallel_s = 0.0;  // activations gathered and summed over the M shards
  double data_parallel_s = 0.0;   // the part of the gradient allreduce backward does not hide
  double step_s = 0.0;
  double samples_per_s = 0.0;        // one member group: global batch / step
  double total_samples_per_s = 0.0;  // all G groups
};

// The expected largest of `draws` independent draws from the distribution that `spread`'s points
// stand for (each an equal share), over its mean: 1 for one draw, and for two points a and b,
// (a + 3b) / (2 (a + b)) where a <= b. 1 for an empty spread.
double expected_slowest(const std::vector<double>& spread, int draws);

// The predicted step of `plan`. The calibration's local batch must be the plan's (a step's compute
// is not linear in the batch): throws ConfigError otherwise.
StepCost predict_step(const Calibration& calibration, const Plan& plan,
                      const PredictionSettings& settings);

}  // namespace strata
