// `strata run CONFIG`: lays the world out in member groups and runs the config's stages in each;
// today the one stage kind is `train`.
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <optional>

#include <fmt/format.h>

#include "core/config.hpp"
#include "core/conv2d_layer.hpp"
#include "core/cpu_kernels.hpp"
#include "core/device.hpp"
#include "core/errors.hpp"
#include "core/rng.hpp"
#include "core/trainer.hpp"
#include "core/weights_io.hpp"
#include "jobs/commands.hpp"
#include "jobs/hpo_stage.hpp"
#include "jobs/run_output.hpp"
#include "jobs/run_plan.hpp"
#include "parallel/gradient_sync.hpp"
#include "parallel/model_parallel_layers.hpp"
#include "parallel/topology.hpp"

namespace strata {

std::string format_duration(double seconds) {
  const auto s = static_cast<long>(std::lround(std::max(seconds, 0.0)));
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

int resolve_threads(int requested) {
  if (requested > 0) return requested;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(CPU_COUNT(&set), 1);
  return 1;
}

namespace {

// What one member group trains with: its own seed and output directory.
struct MemberRun {
  Config config;
  bool writes = false;  // this rank writes the member's files and prints its progress
  std::string tag;      // "" for a single group, "[g3] " otherwise
};

MemberRun member_run(const Config& config, const Topology& topology) {
  MemberRun run{config, topology.member().rank() == 0, ""};
  const int g = topology.coords().group;
  run.config.run.seed = derive_seed(config.run.seed, {seed_member, static_cast<std::uint64_t>(g)});
  // "auto" resolved by the planner, for this stage's own local batch
  run.config.parallel.accumulate = plan_on_run_layout(config, topology.plan()).accumulate;
  if (topology.plan().groups > 1) {
    run.config.output.dir =
        (std::filesystem::path(config.output.dir) / "members" / std::to_string(g)).string();
    run.tag = fmt::format("[g{}] ", g);
  }
  return run;
}

// World rank 0 alone looks at (and with --fresh moves aside) the output directory, then every rank
// learns the outcome, so that all of them fail the same way or none does.
std::optional<RunOutput> prepare_output(const Config& config, bool fresh,
                                        const Communicator& world) {
  std::optional<RunOutput> output;
  std::string problem;
  if (world.rank() == 0) {
    try {
      output.emplace(config.output.dir, fresh);
      if (!output->moved_aside().empty())
        fmt::print("[run] --fresh: the earlier run in {} was moved to {}\n", output->dir().string(),
                   output->moved_aside().string());
    } catch (const std::exception& e) {
      problem = e.what();
    }
  }
  world.broadcast_string(problem, 0);
  if (!problem.empty()) throw ConfigError(problem);
  return output;
}

void print_kernels(Trainer& trainer) {
  const auto report = kernel_report();
  fmt::print("[device] {}\n", detect_devices().summary);
  fmt::print(
      "[kernels] OpenBLAS core {} (CPU: {}); {} worker thread(s), single-threaded kernels each\n",
      report.openblas_core, report.cpu_best, trainer.threads());
  if (!report.warning.empty()) fmt::print(stderr, "warning: {}\n", report.warning);
}

void print_conv_implementations(Model& model) {
  for (std::size_t i = 0; i < model.layer_count(); ++i)
    if (auto* conv = dynamic_cast<Conv2DLayer*>(&model.layer(i)))
      fmt::print("[kernels] {}: oneDNN {}\n", conv->name(), conv->implementation());
}

void train_stage(const MemberRun& member, const Topology& topology, int threads) {
  const Config& config = member.config;
  const TrainingData data = load_training_data(config);
  std::optional<DataParallelSync> sync;
  if (topology.plan().data > 1) sync.emplace(topology.data(), config.parallel.bucket_mib);
  const bool split_model = topology.plan().model > 1;
  Trainer trainer(
      config, data, threads, sync ? &*sync : nullptr,
      split_model ? model_parallel_factory(topology.model(), config.file) : LayerFactory{});
  if (sync) sync->attach(trainer.model().params());
  std::optional<RunOutput> output;
  if (member.writes) {
    output.emplace(RunOutput::inside_checked_run(config.output.dir));
    fmt::print("{}[data] {} train / {} validation / {} test samples, shape {}, {} classes\n",
               member.tag, data.train.count(), data.validation.count(), data.test.count(),
               shape_string(data.sample_shape), data.num_classes);
    if (topology.world_rank() == 0) {
      print_kernels(trainer);
      fmt::print("[model]\n{}", trainer.model().summary());
    }
  }
  const int epochs = config.training.epochs;
  if (member.writes)
    fmt::print(
        "{}[train] {} epochs x {} steps of global batch {} ({} micro-batch(es) x {} replicas x "
        "{})\n",
        member.tag, epochs, trainer.steps_per_epoch(), trainer.global_batch(),
        topology.plan().accumulate, topology.plan().data, config.training.local_batch);
  std::fflush(stdout);
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    const EpochMetrics m = trainer.run_epoch(epoch, [&](const TrainProgress& p) {
      if (!member.writes) return;
      fmt::print("{}[train] epoch {}/{} step {}/{} loss {:.4f} lr {:.4g} {:.0f} samples/s ETA {}\n",
                 member.tag, p.epoch, p.epochs, p.step, p.steps_per_epoch, p.loss, p.lr,
                 p.samples_per_s, format_duration(p.eta_seconds));
      std::fflush(stdout);
    });
    if (!member.writes) continue;
    if (epoch == 1 && topology.world_rank() == 0) print_conv_implementations(trainer.model());
    output->append_metrics(m);
    fmt::print(
        "{}[epoch {}/{}] train loss {:.4f} acc {:.4f} | val loss {:.4f} acc {:.4f} | test acc "
        "{:.4f} | "
        "{:.0f} samples/s | {:.1f}s\n",
        member.tag, epoch, epochs, m.train_loss, m.train_accuracy, m.val_loss, m.val_accuracy,
        m.test_accuracy, m.samples_per_s, m.seconds);
    std::fflush(stdout);
  }
  if (split_model) {
    // Every shard takes part in assembling the whole weights; the member's first rank writes them.
    const auto whole = gather_full_weights(trainer.model());
    if (member.writes) save_weights(output->weights_path().string(), whole);
  } else if (member.writes) {
    save_weights(output->weights_path().string(), trainer.model());
  }
}

}  // namespace

int run_command(const RunOptions& options) {
  // Loading the config needs no MPI; it gives the world (and every communicator split from it)
  // its stall watchdog.
  const Config config = load_config(options.config_path);
  const Communicator world = Communicator::world(config.parallel.watchdog_s);
  // Every rank reads the same config, so every rank stops here alike, before any collective.
  const bool has_search = std::any_of(config.stages.begin(), config.stages.end(),
                                      [](const StageSpec& s) { return s.kind == StageKind::hpo; });
  if (config.objective && (!has_search || config.stages.size() > 1))
    throw ConfigError(
        fmt::format("{}: model.objective: a function objective replaces training: the stages must "
                    "be one hpo stage to search it",
                    config.file));
  const int per_node = ranks_per_node(measure_ranks_per_node(world));
  const Plan plan = plan_run(config, world.size(), per_node);
  std::optional<RunOutput> top = prepare_output(config, options.fresh, world);
  const Topology topology(world, plan);
  // Ranks on one node share its cores: "all cores" means this rank's share of them.
  const int requested = options.threads >= 0 ? options.threads : config.run.threads;
  int threads = requested > 0 ? requested
                              : std::max(1, resolve_threads(0) / std::min(per_node, world.size()));
  if (plan.model > 1 && threads > 1) {
    // Model-parallel layers communicate inside forward and backward; only the main thread calls
    // MPI.
    if (world.rank() == 0) fmt::print("[run] M = {} > 1: one worker thread per rank\n", plan.model);
    threads = 1;
  }
  if (world.rank() == 0) {
    fmt::print("[run] {} from {}, seed {}, output {}\n[plan] {}", config.run.name, config.file,
               config.run.seed, config.output.dir, describe(plan));
    top->write_text("plan.txt", describe(plan));
  }
  const MemberRun member = member_run(config, topology);
  for (const auto& stage : config.stages) {
    if (stage.kind == StageKind::train) train_stage(member, topology, threads);
    if (stage.kind == StageKind::hpo)
      hpo_stage(config, stage.hpo, topology, threads, top ? &*top : nullptr);
  }
  world.barrier();
  if (world.rank() == 0) {
    const std::string where =
        plan.groups > 1 ? (std::filesystem::path(config.output.dir) / "members/<g>").string()
                        : config.output.dir;
    if (!has_search)
      fmt::print(
          "[run] done. Results: {}/metrics.jsonl (per-epoch metrics), {}/weights.h5 (final "
          "weights)\n",
          where, where);
    else
      fmt::print(
          "[run] done. Results: {0}/trials.csv and trials.jsonl (a row per training), "
          "{0}/hpo_summary.json\n",
          config.output.dir);
  }
  return 0;
}

int predict_command(const std::string& config_path, const std::string& weights_path, int threads) {
  const Config config = load_config(config_path);
  const TrainingData data = load_training_data(config);
  Trainer trainer(config, data, resolve_threads(threads >= 0 ? threads : config.run.threads));
  load_weights(weights_path, trainer.model());
  trainer.broadcast_weights();
  const Evaluation test = trainer.evaluate(data.test);
  fmt::print("test accuracy {:.4f} loss {:.4f} ({} samples, weights {})\n", test.accuracy,
             test.loss, test.count, weights_path);
  return 0;
}

}  // namespace strata
