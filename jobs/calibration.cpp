#include "jobs/calibration.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <functional>
#include <map>
#include <stdexcept>
#include <vector>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "core/measurement.hpp"
#include "core/plan.hpp"
#include "core/trace.hpp"
#include "core/trainer.hpp"
#include "core/training_data.hpp"
#include "jobs/commands.hpp"
#include "jobs/group_training.hpp"
#include "jobs/run_plan.hpp"
#include "parallel/model_parallel_layers.hpp"
#include "parallel/topology.hpp"

namespace strata {

namespace {

// The config to time: a search's largest trial, trained alone for `steps` steps per epoch, with
// small evaluation sets (evaluation is not part of a step).
Config timed_config(const Config& config, const CalibrationOptions& options) {
  const ModelSize size = largest_model_size(config);
  Config timed = size.largest_trial.empty() ? config : instantiate(config, size.largest_trial);
  // The trace counts evaluation's forward passes with training's: keep them a few samples.
  timed.data.validation_fraction = 0.002;
  timed.data.train_subset =
      static_cast<int>(std::ceil(timed.training.local_batch * options.steps / 0.998)) + 1;
  timed.data.test_subset = 1;
  timed.training.epochs = 1 << 20;  // the schedule's horizon; only some epochs run
  timed.training.schedule = ScheduleSpec{};
  timed.parallel.accumulate = 1;
  timed.run.device = DeviceChoice::cpu;  // the model is of CPU steps
  return timed;
}

// The model every measurement times and its data, built once: finding a search's largest trial
// builds models at the bounds of every parameter.
struct Timed {
  Config config;
  TrainingData data;
};

Timed timed_model(const Config& config, const CalibrationOptions& options) {
  Config timed = timed_config(config, options);
  TrainingData data = load_training_data(timed);
  return {std::move(timed), std::move(data)};
}

// The median seconds of one optimizer step over `repeats` epochs (after one epoch of warm-up).
double step_seconds(Trainer& trainer, int repeats) {
  trainer.run_epoch({});
  std::vector<double> steps;
  steps.reserve(static_cast<std::size_t>(repeats));
  for (int r = 0; r < repeats; ++r)
    steps.push_back(static_cast<double>(trainer.global_batch()) /
                    trainer.run_epoch({}).samples_per_s);
  return median(steps);
}

// Seconds per step of each traced event (forward/backward per layer, data read, optimizer step)
// over one epoch, after one epoch of warm-up.
std::map<std::string, double> traced_epoch(Trainer& trainer) {
  trainer.run_epoch({});
  Trace trace;
  trainer.set_trace(&trace);
  trainer.run_epoch({});
  trainer.set_trace(nullptr);
  const auto steps = static_cast<double>(trainer.steps_per_epoch());
  std::map<std::string, double> per_step;
  for (const auto& [name, seconds] : trace.totals()) per_step[name] = seconds / steps;
  return per_step;
}

double seconds_of(const std::map<std::string, double>& per_step, const std::string& event) {
  const auto found = per_step.find(event);
  return found == per_step.end() ? 0.0 : found->second;
}

std::vector<LayerTiming> layer_timings(Model& model, const std::vector<LayerSpec>& specs,
                                       const std::map<std::string, double>& per_step) {
  std::vector<LayerTiming> layers;
  bool learns_before = false;
  for (std::size_t i = 0; i < model.layer_count(); ++i) {
    Layer& layer = model.layer(i);
    LayerTiming t;
    t.name = layer.name();
    t.kind = layer.kind();
    // A fused layer (conv2d+relu) carries its first spec's name.
    const auto spec = std::find_if(specs.begin(), specs.end(),
                                   [&](const LayerSpec& s) { return s.name == t.name; });
    if (spec == specs.end())
      throw std::logic_error(fmt::format("calibrate: layer {} has no spec", t.name));
    t.split = spec->split;
    for (const Param& p : model.params_of(i)) t.tensors.push_back(p.value->size());
    t.input_elements = element_count(i == 0 ? model.input_shape() : model.output_shape(i - 1));
    t.output_elements = element_count(model.output_shape(i));
    t.needs_input_gradient = learns_before;
    if (!t.tensors.empty()) learns_before = true;
    t.gathers_output =
        t.split == SplitKind::column &&
        column_split_gathers_output(specs, static_cast<std::size_t>(spec - specs.begin()));
    t.forward_s = seconds_of(per_step, "forward " + t.name);
    t.backward_s = seconds_of(per_step, "backward " + t.name);
    layers.push_back(std::move(t));
  }
  return layers;
}

// MPI_Allreduce between all ranks (on one node): latency from an 8-byte sum, bandwidth from a
// 16 MiB one, both as the cost model's allreduce formula reads them.
LinkCost measure_link(const Communicator& world) {
  const auto time_sum = [&](std::size_t floats) {
    std::vector<float> buffer(floats, 1.0f);
    std::vector<double> times;
    const int repeats = floats > 1024 ? 10 : 200;
    for (int r = -1; r < repeats; ++r) {
      world.barrier();
      const auto start = std::chrono::steady_clock::now();
      world.allreduce_sum(std::span<float>(buffer));
      const double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (r >= 0) times.push_back(world.allreduce_sum_double(seconds) / world.size());
    }
    return median(times);
  };
  const double p = world.size();
  const double latency = time_sum(2) / (2.0 * std::ceil(std::log2(p)));
  const double big_bytes = 16.0 * (1 << 20);
  const double big = time_sum(static_cast<std::size_t>(big_bytes / sizeof(float)));
  const double moving = std::max(1e-9, big - 2.0 * std::ceil(std::log2(p)) * latency);
  return LinkCost{latency, 2.0 * (p - 1.0) / p * big_bytes / moving};
}

void print_step(const std::string& what, double seconds) {
  fmt::print("[calibrate] {}: {:.3f} ms per step\n", what, 1e3 * seconds);
  std::fflush(stdout);
}

// With the spread of steps taken independently: the slower of two, which two replicas of them
// would wait for.
void print_step(const std::string& what, const StepTiming& step) {
  fmt::print("[calibrate] {}: {:.3f} ms per step (the slower of two: {:.2f}x the mean)\n", what,
             1e3 * step.step_s, expected_slowest(step.spread, 2));
  std::fflush(stdout);
}

// The cores of this node a rank may use.
int node_cores(const CalibrationOptions& options) {
  return options.max_threads > 0 ? options.max_threads : resolve_threads(0);
}

// `config_file`: the user's config, which the calibration names. `share`: each rank's share of the
// cores in this launch, timed alone too to compare with.
Calibration measure_compute(const std::string& config_file, const Timed& t,
                            const CalibrationOptions& options, int share) {
  const Config& timed = t.config;
  const TrainingData& data = t.data;
  Calibration c;
  c.config = config_file;
  c.cpu = cpu_model_name();
  c.cores = node_cores(options);
  c.local_batch = timed.training.local_batch;
  c.bucket_mib = timed.parallel.bucket_mib;

  {
    Trainer trainer(timed, build_model(timed, data), data, standalone_plan(timed), 1);
    fmt::print("[calibrate] {}: {} steps of local batch {} on 1 thread, each layer timed\n",
               config_file, trainer.steps_per_epoch(), c.local_batch);
    std::fflush(stdout);
    const auto per_step = traced_epoch(trainer);
    c.layers = layer_timings(trainer.model(), timed.layers, per_step);
    c.data_s = seconds_of(per_step, "data read");
    c.optimizer_s = seconds_of(per_step, "optimizer step");
  }
  // Powers of 2, all the cores, and a rank's share of them in this launch (which the shared step
  // is compared with).
  std::vector<int> thread_counts{1};
  for (int t = 2; t < c.cores; t *= 2) thread_counts.push_back(t);
  if (c.cores > 1) thread_counts.push_back(c.cores);
  thread_counts.push_back(share);
  std::sort(thread_counts.begin(), thread_counts.end());
  thread_counts.erase(std::unique(thread_counts.begin(), thread_counts.end()), thread_counts.end());
  for (int threads : thread_counts) {
    Trainer trainer(timed, build_model(timed, data), data, standalone_plan(timed), threads);
    c.steps.push_back(StepTiming{threads, step_seconds(trainer, options.repeats), {}});
    print_step(fmt::format("{} thread(s)", threads), c.steps.back().step_s);
  }
  return c;
}

// How finely a step's spread is kept: 40 points put the expected slowest of many replicas at most
// at the 98.75% quantile, which understates it for a large D.
constexpr int spread_points = 40;

// The spread of `steps` (each over its repeat's mean) pooled over every rank of `ranks`: each
// rank's summary, gathered, summarised again over their mean. Every rank has steps or none has
// (the launch's groups train alike, as many steps an epoch), so all take the same branches; empty
// for none.
std::vector<double> pooled_spread(const Communicator& ranks, const std::vector<double>& steps) {
  if (steps.empty()) return {};
  const std::vector<double> mine = quantiles(steps, spread_points);
  std::vector<float> local(mine.begin(), mine.end());
  std::vector<float> all(local.size() * static_cast<std::size_t>(ranks.size()));
  ranks.allgather(local, all);
  const std::vector<double> pooled(all.begin(), all.end());
  const double pooled_mean = mean(pooled);
  if (!(pooled_mean > 0.0) || !std::isfinite(pooled_mean)) return {};
  std::vector<double> spread = quantiles(pooled, spread_points);
  for (double& s : spread) s /= pooled_mean;
  return spread;
}

// This rank's step (the median over `repeats` epochs after one of warm-up, as step_seconds) and
// the spread of the single steps of all of `ranks`, which train at once.
struct MeasuredSteps {
  double step_s = 0.0;
  std::vector<double> spread;
};

// A step hook on `trainer` for as long as this lives: it writes into the caller's locals, so it
// must not outlive them, on any way out.
class ScopedStepHook {
 public:
  ScopedStepHook(Trainer& trainer, std::function<void()> hook) : trainer_(trainer) {
    trainer_.set_step_hook(std::move(hook));
  }
  ~ScopedStepHook() { trainer_.set_step_hook(nullptr); }
  ScopedStepHook(const ScopedStepHook&) = delete;
  ScopedStepHook& operator=(const ScopedStepHook&) = delete;

 private:
  Trainer& trainer_;
};

MeasuredSteps steps_and_spread(Trainer& trainer, const Communicator& ranks, int repeats) {
  using Clock = std::chrono::steady_clock;
  trainer.run_epoch({});
  std::vector<Clock::time_point> ends;  // of each step: a clock read, nothing that perturbs it
  ends.reserve(static_cast<std::size_t>(trainer.steps_per_epoch()));
  const ScopedStepHook hook(trainer, [&ends] { ends.push_back(Clock::now()); });
  std::vector<double> epochs, steps;
  for (int r = 0; r < repeats; ++r) {
    ends.clear();
    epochs.push_back(static_cast<double>(trainer.global_batch()) /
                     trainer.run_epoch({}).samples_per_s);
    std::vector<double> these;
    for (std::size_t i = 1; i < ends.size(); ++i)
      these.push_back(std::chrono::duration<double>(ends[i] - ends[i - 1]).count());
    // A repeat in which the whole node ran slow slows every replica alike and adds no wait: each
    // step counts against its repeat's mean over the ranks.
    const double over_ranks = ranks.allreduce_sum_double(mean(these)) / ranks.size();
    if (over_ranks > 0.0)
      for (double s : these) steps.push_back(s / over_ranks);
  }
  return {median(epochs), pooled_spread(ranks, steps)};
}

// A replica split over ranks 0 and 1 (its model-parallel layers on their own communicator), one
// thread each, while the other ranks wait: the step, its spread and its optimizer part,
// meaningful on rank 0.
struct SplitStep {
  double step_s = 0.0, optimizer_s = 0.0;
  std::vector<double> spread;
};

SplitStep split_step(const Timed& t, const Communicator& world, const CalibrationOptions& options) {
  const Communicator pair =
      world.split(world.rank() < 2 ? 0 : MPI_UNDEFINED, world.rank(), "calibrate_model");
  if (!pair.valid()) return {};
  const Config& timed = t.config;
  const TrainingData& data = t.data;
  Plan plan = standalone_plan(timed);
  plan.model = 2;
  plan.world_size = 2;
  Trainer trainer(timed, build_model(timed, data, model_parallel_factory(pair, timed.file)), data,
                  plan, 1);
  const auto per_step = traced_epoch(trainer);
  MeasuredSteps measured = steps_and_spread(trainer, pair, options.repeats);
  return {measured.step_s, seconds_of(per_step, "optimizer step"), std::move(measured.spread)};
}

// Every rank of the launch training at once in groups of `replicas` x `shards` (as strata run
// builds them: the same communicators, gradient sums and split layers) on `threads` workers each:
// the mean over ranks of each rank's median step, and the spread of the single steps. Only the
// whole launch: MPICH polls differently once a node holds more ranks than cores, so a subset of a
// larger launch would not see what a launch of that size does.
StepTiming node_step(const Timed& t, const Communicator& world, const CalibrationOptions& options,
                     int replicas, int shards, int threads) {
  Plan plan = standalone_plan(t.config, replicas);
  plan.model = shards;
  plan.groups = world.size() / plan.group_size();
  plan.world_size = world.size();
  plan.ranks_per_node = world.size();
  const Topology topology(world, plan);
  GroupTraining training(t.config, t.data, topology, plan, threads);
  world.barrier();
  MeasuredSteps measured = steps_and_spread(*training.trainer, world, options.repeats);
  return StepTiming{threads, world.allreduce_sum_double(measured.step_s) / world.size(),
                    std::move(measured.spread)};
}

// The node full of ranks, in each arrangement a plan on it can take: independent members on one
// thread (as split models train) and on their share of the cores; pairs of replicas (D = 2) on
// their share, their gradient sums included; pairs of shards (M = 2). Every rank takes the same
// branches: `share` and `splits` are the same on all.
void measure_node_steps(const Timed& t, const Communicator& world,
                        const CalibrationOptions& options, int share, bool splits, Calibration& c) {
  const int ranks = world.size();
  std::vector<int> thread_counts{1};
  if (share > 1) thread_counts.push_back(share);
  for (int threads : thread_counts) {
    const StepTiming step = node_step(t, world, options, 1, 1, threads);
    if (world.rank() != 0) continue;
    c.shared_steps.push_back(step);
    print_step(fmt::format("all {} ranks stepping at once on {} thread(s) each", ranks, threads),
               step);
  }
  if (ranks % 2 != 0) return;
  const StepTiming replicas = node_step(t, world, options, 2, 1, share);
  if (world.rank() == 0) {
    // Printed without the slower of two: the pairs' steps wait for each other already.
    c.replica_pairs_step = replicas;
    print_step(fmt::format("{} pair(s) of replicas (D = 2) stepping at once on {} thread(s) each",
                           ranks / 2, share),
               replicas.step_s);
  }
  if (!splits || ranks < 4) return;  // on 2 ranks the split step alone is this
  const StepTiming shard_pairs = node_step(t, world, options, 1, 2, 1);
  c.shared_split_step_s = shard_pairs.step_s;
  c.shared_split_spread = shard_pairs.spread;
  if (world.rank() == 0)
    print_step(fmt::format("{} pairs of ranks stepping split at once", ranks / 2), shard_pairs);
}

}  // namespace

Calibration measure_calibration(const Config& config, const Communicator& world,
                                const CalibrationOptions& options) {
  // The steps of all ranks at once only mean something for ranks that share a node.
  const int per_node = ranks_per_node(measure_ranks_per_node(world));
  if (per_node != world.size())
    throw ConfigError(fmt::format(
        "strata calibrate times one node: its {} ranks span nodes (at most {} share one); launch "
        "it on one node with as many ranks as the job puts on each",
        world.size(), per_node));
  // Ranks bound to core sets of different sizes would disagree on their share of the cores, and
  // so on which steps to time: all take the largest.
  const int share = world.allreduce_max(share_of_cores(node_cores(options), world.size()));
  // Every rank reads the same config and file, so all fail here alike or none does.
  const Timed timed = timed_model(config, options);
  Calibration c;
  // The others wait in the barrier (sleeping, with the watchdog) while rank 0 has the cores.
  if (world.rank() == 0) c = measure_compute(config.file, timed, options, share);
  world.barrier();
  if (world.size() > 1) {
    const LinkCost link = measure_link(world);
    if (world.rank() == 0) {
      c.intra_node = link;
      c.intra_node_ranks = world.size();
      fmt::print("[calibrate] MPI_Allreduce on {} ranks: {:.2f} us latency, {:.2f} GB/s\n",
                 world.size(), 1e6 * link.latency_s, link.bytes_per_s / 1e9);
    }
    // Every rank reads the same layers (the timed ones: a search's largest trial), so all take
    // the same path. A column split must divide by 2 (a config meant for M = 3 does not): such a
    // model is not timed split.
    bool splits = false, halves = true;
    for (const LayerSpec& l : timed.config.layers) {
      if (l.split == SplitKind::none) continue;
      splits = true;
      const int size = l.kind == LayerKind::conv2d ? l.filters : l.units;
      if (l.split == SplitKind::column && size % 2 != 0) halves = false;
    }
    if (splits && halves) {
      const SplitStep alone = split_step(timed, world, options);
      c.split_step_s = alone.step_s;
      c.split_optimizer_s = alone.optimizer_s;
      c.split_spread = alone.spread;
      if (world.rank() == 0)
        print_step("split over 2 ranks (M = 2), 1 thread each",
                   StepTiming{1, alone.step_s, alone.spread});
      world.barrier();  // the others wait here, asleep, not polling in the next collective
    }
    if (splits && !halves && world.rank() == 0)
      fmt::print(
          "[calibrate] a split layer does not divide over 2 ranks: M > 1 will be predicted "
          "from the unsplit layer times\n");
    measure_node_steps(timed, world, options, share, splits && halves, c);
    world.barrier();
  }
  return c;
}

}  // namespace strata
