// `strata run CONFIG`: lays the world out in member groups and runs the config's stages in order,
// resuming a run whose output.dir holds checkpoints.

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <optional>

#include <fmt/format.h>

#include "core/config.hpp"
#include "core/cpu_caches.hpp"
#include "core/errors.hpp"
#include "core/rng.hpp"
#include "core/trainer.hpp"
#include "core/weights_io.hpp"
#include "jobs/artifacts.hpp"
#include "jobs/checkpoint_store.hpp"
#include "jobs/commands.hpp"
#include "jobs/run_output.hpp"
#include "jobs/run_plan.hpp"
#include "jobs/run_record.hpp"
#include "jobs/stage.hpp"
#include "jobs/stop_signals.hpp"
#include "jobs/trace_file.hpp"
#include "parallel/topology.hpp"

namespace strata {

int resolve_threads(int requested) {
  if (requested > 0) return requested;
  return std::max(static_cast<int>(allowed_cpus().size()), 1);
}

namespace {

// A rank whose worker threads may run on cores of several L3 caches moves what they share between
// them each step: on a VM whose host split its two vCPUs over two L3s, the 2-thread MLP's step
// took 840-877 us against 527-565 while they split the batch. Said once, by world rank 0 of its
// own cores.
void note_l3_caches(int threads) {
  const auto caches = l3_caches(allowed_cpus());
  if (caches.size() < 2) return;
  fmt::print(
      "[run] note: rank 0's {} worker threads may run on cores of {} L3 caches (CPUs {}): "
      "each step moves activations between them, and when they split the batch the weights and "
      "gradients too. A search keeps each training in "
      "one L3 with a rank per L3 (sbatch --cpus-per-task = the cores of one L3, "
      "srun --cpu-bind=cores), its trainings as member groups.\n",
      threads, caches.size(), fmt::join(caches, "; "));
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
  if (problem.empty()) return output;
  const SourceMark at = config.output.dir_mark;
  if (at.line == 0) throw ConfigError(fmt::format("output.dir (default): {}", problem));
  throw ConfigError(
      fmt::format("{}:{}:{}: output.dir: {}", config.file, at.line, at.column, problem));
}

// Where the run as a whole stands: the stage it is in, the member groups that stage had in the
// allocation that started it (StageContext::first_groups; 0 before it starts), and what the stages
// done so far published. Saved in output.dir/checkpoints/run by world rank 0.
struct RunState {
  int stage = 0;
  int first_groups = 0;
  Artifacts artifacts;
};

RunState load_run_state(const RunOutput* top, const Communicator& world) {
  RunState state;
  std::string problem;
  if (top != nullptr) {
    try {
      CheckpointStore store(top->checkpoints_dir() / "run", 2);
      const auto loaded = store.load_newest([](const std::string& why) {
        fmt::print(stderr, "strata: skipping a damaged run checkpoint: {}\n", why);
      });
      if (loaded) {
        state.stage = static_cast<int>(loaded->state.get_int("run/stage"));
        state.first_groups = static_cast<int>(loaded->state.get_int("run/first_groups"));
        state.artifacts.load_state(loaded->state, "run");
      }
    } catch (const DataError& e) {
      problem = e.what();
    }
  }
  world.broadcast_string(problem, 0);
  if (!problem.empty()) throw DataError(problem);
  // Only rank 0 read them; the others hold 0, so the maximum is rank 0's value.
  state.stage = world.allreduce_max(world.rank() == 0 ? state.stage : 0);
  state.first_groups = world.allreduce_max(world.rank() == 0 ? state.first_groups : 0);
  state.artifacts.share(world, 0);
  return state;
}

void save_run_state(const RunOutput& top, const RunState& state, int stages) {
  CheckpointStore store(top.checkpoints_dir() / "run", 2);
  StateDict dict;
  dict.put_int("run/stage", state.stage);
  dict.put_int("run/stages", stages);
  dict.put_int("run/first_groups", state.first_groups);
  state.artifacts.save_state(dict, "run");
  dict.put_text("meta/kind", "run");
  store.save(dict);
  store.wait();
}

// plan.txt: the run's plan, or each stage's when a stage has its own parallel block.
std::string describe_plans(const std::vector<std::unique_ptr<Stage>>& stages,
                           const std::vector<Plan>& plans) {
  const bool one_plan = std::all_of(plans.begin(), plans.end(), [&](const Plan& p) {
    return describe(p) == describe(plans.front());
  });
  if (one_plan) return describe(plans.front());
  std::string text;
  for (std::size_t i = 0; i < plans.size(); ++i)
    text += fmt::format("stage {} ({}):\n{}", i + 1, stages[i]->name(), describe(plans[i]));
  return text;
}

// Under Slurm: the job's identity in the log, and a step launched without MPI (srun --mpi=none
// starts N one-rank worlds that would each train alone) refused.
void check_slurm_step(const Communicator& world) {
  const char* job = std::getenv("SLURM_JOB_ID");
  if (job == nullptr) return;
  auto env = [](const char* name) {
    const char* v = std::getenv(name);
    return std::string(v != nullptr ? v : "-");
  };
  const std::string tasks = env("SLURM_NTASKS");
  if (world.size() == 1 && tasks != "-" && tasks != "1")
    throw ConfigError(fmt::format(
        "Slurm started {} tasks (SLURM_NTASKS) but MPI sees a world of 1 rank (SLURM_PROCID {}): "
        "launch the step with MPI, e.g. srun --mpi=pmi2",
        tasks, env("SLURM_PROCID")));
  if (world.rank() == 0)
    fmt::print("[slurm] job {} restart {}, SLURM_PROCID {} of SLURM_NTASKS {}\n", job,
               env("SLURM_RESTART_COUNT") == "-" ? "0" : env("SLURM_RESTART_COUNT"),
               env("SLURM_PROCID"), tasks);
}

// The stages from state.stage on; returns the exit code (75 when a signal stopped one).
int run_stages(const Config& config, const RunOptions& options, const Communicator& world,
               const StopSignals& signals, const std::vector<std::unique_ptr<Stage>>& pipeline,
               const std::vector<Plan>& plans, int per_node, const RunOutput* top, RunState& state);

}  // namespace

int run_command(const RunOptions& options) {
  // Loading the config needs no MPI; it gives the world (and every communicator split from it)
  // its stall watchdog.
  const Config config = load_config(options.config_path, options.overrides);
  // Handlers first: a stop signal that comes while the world is set up is kept, not fatal.
  const StopSignals signals(config.checkpoint.signal);
  const Communicator world = Communicator::world(config.parallel.watchdog_s);
  check_slurm_step(world);
  // ${VAR} expands on every rank from its own environment: a variable that differs between ranks
  // (SLURM_PROCID) would give them different configs, and they would part ways in a collective.
  const auto fingerprint =
      static_cast<int>(std::hash<std::string>{}(config.resolved_text) & 0x3fffffffU);
  if (world.allreduce_max(fingerprint) != -world.allreduce_max(-fingerprint))
    throw ConfigError(fmt::format(
        "{}: the ranks read different configs: an environment variable it expands (${{...}}) "
        "differs between ranks; use one that is the same on every rank (SLURM_JOB_ID, not "
        "SLURM_PROCID)",
        config.file));
  // Every rank reads the same config, so every rank stops here alike, before any collective.
  // Artifact references and what each stage can check are checked before any rank plans or
  // trains, and so are class labels and a search space in which no trial could build its model
  // (each rank reads the data file's shape alike).
  const auto pipeline = make_stages(config);
  check_class_labels(config);
  if (!config.objective && !search_space(config).empty()) largest_model_size(config);
  const int stages = static_cast<int>(config.stages.size());
  const int per_node = ranks_per_node(measure_ranks_per_node(world));
  std::vector<Plan> plans;
  plans.reserve(pipeline.size());
  for (const auto& stage : pipeline) plans.push_back(stage->plan(config, world.size(), per_node));
  std::optional<RunOutput> top = prepare_output(config, options.fresh, world);
  RunState state = load_run_state(top ? &*top : nullptr, world);
  if (world.rank() == 0) {
    fmt::print("[run] {} from {}, seed {}, output {}\n[plan] {}", config.run.name, config.file,
               config.run.seed, config.output.dir, describe_plans(pipeline, plans));
    top->write_text("plan.txt", describe_plans(pipeline, plans));
    for (std::size_t i = 0; i < pipeline.size(); ++i)
      fmt::print(
          "{}", pipeline[i]->layout_note(
                    config, plans[i], static_cast<int>(i) == state.stage ? state.first_groups : 0));
    if (top->resuming())
      fmt::print("[run] resuming in {}: stage {}/{}{}\n", top->dir().string(),
                 std::min(state.stage + 1, stages), stages,
                 state.stage >= stages ? " (every stage is done)" : "");
    else
      save_run_state(*top, state, stages);
    std::fflush(stdout);
  }
  RunRecord record(config, world, top ? top->dir() / "run.json" : std::filesystem::path(),
                   describe_plans(pipeline, plans));
  // The record says how this allocation ended, an error included (then it goes on to main).
  try {
    const int code = run_stages(config, options, world, signals, pipeline, plans, per_node,
                                top ? &*top : nullptr, state);
    record.finish(code, "");
    return code;
  } catch (const ConfigError& e) {
    record.finish(exit_usage, e.what());
    throw;
  } catch (const DataError& e) {
    record.finish(exit_data, e.what());
    throw;
  } catch (const std::exception& e) {
    record.finish(exit_internal, e.what());
    throw;
  }
}

namespace {

int run_stages(const Config& config, const RunOptions& options, const Communicator& world,
               const StopSignals& signals, const std::vector<std::unique_ptr<Stage>>& pipeline,
               const std::vector<Plan>& plans, int per_node, const RunOutput* top,
               RunState& state) {
  const int stages = static_cast<int>(config.stages.size());
  int last_groups = 1;
  // Every rank's timeline starts at the same barrier, so that the tracks line up.
  std::optional<Trace> trace;
  if (config.output.trace) {
    world.barrier();
    trace.emplace();
  }
  const auto trace_path = top != nullptr ? top->dir() / "trace.json" : std::filesystem::path();
  bool l3_noted = false;
  for (; state.stage < stages; ++state.stage) {
    Stage& stage = *pipeline[static_cast<std::size_t>(state.stage)];
    const Plan& plan = plans[static_cast<std::size_t>(state.stage)];
    const Topology topology(world, plan);
    // Ranks on one node share its cores: "all cores" means this rank's share of them.
    const int requested = options.threads >= 0 ? options.threads : config.run.threads;
    int threads = requested > 0
                      ? requested
                      : share_of_cores(resolve_threads(0), std::min(per_node, world.size()));
    if (plan.model > 1 && threads > 1) {
      // Model-parallel layers communicate inside forward and backward; only the main thread calls
      // MPI.
      if (world.rank() == 0)
        fmt::print("[run] {}: M = {} > 1: one worker thread per rank\n", stage.name(), plan.model);
      threads = 1;
    }
    if (world.rank() == 0 && threads > 1 && !l3_noted) {
      l3_noted = true;
      note_l3_caches(threads);
    }
    // The stage's members are fixed by the allocation that starts it.
    if (state.first_groups == 0) {
      state.first_groups = plan.groups;
      if (world.rank() == 0) save_run_state(*top, state, stages);
    }
    if (world.rank() == 0) {
      fmt::print("[run] stage {}/{}: {} on G = {} x D = {} x M = {}\n", state.stage + 1, stages,
                 stage.name(), plan.groups, plan.data, plan.model);
      std::fflush(stdout);
    }
    // A stop signal ends the stage early on every group that is still training; the others learn
    // it here, so that all ranks leave together with the same code.
    std::string stopped;
    const auto stage_start = std::chrono::steady_clock::now();
    try {
      // The first stage of a kind writes into output.dir, a later one into a subdirectory.
      Config stage_config = stage.config(config);
      const bool own_dir = !stage.subdirectory().empty();
      if (own_dir)
        stage_config.output.dir =
            (std::filesystem::path(config.output.dir) / stage.subdirectory()).string();
      std::optional<RunOutput> stage_output;
      if (top && own_dir)
        stage_output.emplace(RunOutput::inside_checked_run(stage_config.output.dir));
      const std::uint64_t stage_seed =
          own_dir ? derive_seed(stage_config.run.seed,
                                {seed_stage, static_cast<std::uint64_t>(state.stage)})
                  : stage_config.run.seed;
      const StageContext context{stage_config,
                                 topology,
                                 threads,
                                 state.stage,
                                 stage_seed,
                                 state.first_groups,
                                 &signals,
                                 stage_output ? &*stage_output
                                 : top        ? top
                                              : nullptr,
                                 config.output.dir,
                                 options.verbose,
                                 trace ? &*trace : nullptr};
      stage.run(context, state.artifacts);
    } catch (const Interrupted& e) {
      stopped = e.what();
    }
    if (world.allreduce_max(stopped.empty() ? 0 : 1) > 0) {
      // One line for the job, not one per group.
      if (world.rank() == 0)
        fmt::print("[run] {}; exit {} (requeue to resume)\n",
                   stopped.empty() ? "stopped by a signal, checkpointed" : stopped,
                   int{exit_checkpointed});
      std::fflush(stdout);
      if (trace) write_trace(world, *trace, trace_path);
      return exit_checkpointed;
    }
    if (world.rank() == 0) {
      fmt::print(
          "[run] stage {}/{} ({}) done in {:.1f}s\n", state.stage + 1, stages, stage.name(),
          std::chrono::duration<double>(std::chrono::steady_clock::now() - stage_start).count());
      std::fflush(stdout);
    }
    // Later stages on every rank read what this one published (on world rank 0).
    state.artifacts.share(world, 0);
    if (world.rank() == 0) {
      RunState next{state.stage + 1, 0, state.artifacts};
      save_run_state(*top, next, stages);
      state.artifacts.write(top->dir() / "artifacts.json");
    }
    last_groups = state.first_groups;
    state.first_groups = 0;
  }
  world.barrier();
  if (trace) write_trace(world, *trace, trace_path);
  if (world.rank() == 0) {
    if (stages == 1 && config.stages.front().kind() == StageKind::train) {
      const std::string where =
          last_groups > 1 ? (std::filesystem::path(config.output.dir) / "members/<m>").string()
                          : config.output.dir;
      fmt::print(
          "[run] done. Results: {}/metrics.jsonl (per-epoch metrics), {}/weights.h5 (final "
          "weights)\n",
          where, where);
    } else {
      fmt::print("[run] done. Results (paths under {}; all of it in artifacts.json):\n{}",
                 config.output.dir, state.artifacts.summary());
    }
  }
  return 0;
}

}  // namespace

}  // namespace strata
