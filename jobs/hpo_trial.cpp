#include "jobs/hpo_trial.hpp"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <optional>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "core/clock.hpp"
#include "core/config_names.hpp"
#include "core/errors.hpp"
#include "core/rng.hpp"
#include "core/trainer.hpp"
#include "hpo/objectives.hpp"
#include "hpo/trial_guard.hpp"
#include "hpo/trial_log.hpp"
#include "jobs/commands.hpp"
#include "jobs/fault_injection.hpp"
#include "jobs/group_training.hpp"
#include "jobs/run_plan.hpp"
#include "jobs/training_session.hpp"
#include "parallel/failure_agreement.hpp"

namespace strata {

namespace {

// Thrown at a step boundary, alike on every rank of the group, when a trial runs over
// trial_timeout_s.
class TrialOverTime : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Thrown after an epoch, alike on every rank of the group, when the pruning rule stops the trial.
struct TrialPruned {
  int epoch = 0;
  double value = 0.0;
};

// Where a trial's own results go: its validation curve (metrics.jsonl) and, while it ranks among
// the keep_top best, its final weights.
std::filesystem::path trial_dir(const StageContext& c, int trial_id) {
  return std::filesystem::path(c.config.output.dir) / "trials" / std::to_string(trial_id);
}

std::filesystem::path trial_checkpoints(const StageContext& c, int trial_id) {
  return std::filesystem::path(c.config.output.dir) / "checkpoints" /
         fmt::format("stage{}", c.stage_index) / fmt::format("trial{}", trial_id);
}

}  // namespace

std::map<std::string, std::string> trial_values(const SearchSpace& space, const Genome& genome) {
  std::map<std::string, std::string> values;
  for (std::size_t k = 0; k < space.params.size(); ++k)
    values[space.params[k].name] = describe_value(space.params[k], genome[k]);
  return values;
}

TrialOutcome evaluate_function(const ObjectiveSpec& objective, std::uint64_t seed,
                               const Trial& trial, const std::function<void()>& serve) {
  const auto start = Clock::now();
  TrialOutcome o;
  o.fitness = evaluate_objective(parse_objective(objective.name), trial.genome);
  o.val_accuracy = o.test_accuracy = std::nan("");  // a function has no data to measure
  // The artificial evaluation time stands for a training; the coordinator keeps serving meanwhile.
  const double pretend =
      eval_seconds(EvalTime{objective.eval_seconds, objective.eval_stddev_seconds}, seed, trial.id);
  while (seconds_since(start) < pretend) {
    serve();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  o.seconds = seconds_since(start);
  return o;
}

TrialOutcome train_trial(const StageContext& c, const HpoSpec& spec, const SearchSpace& space,
                         const TrainingData& data, const Trial& trial,
                         const TrialChannel& channel) {
  const std::function<void()>& serve = channel.serve;
  const auto start = Clock::now();
  const std::string span_name = fmt::format("trial {}", trial.id);
  const TraceSpan span(c.trace, span_name, "hpo");
  const Topology& topology = c.topology;
  Config config;
  std::optional<GroupTraining> group;
  Trainer* trainer = nullptr;
  std::optional<TrainingSession> session;
  int global_batch = 0;
  auto build = [&] {
    // Every rank of the group reaches GroupTraining, whose own agreements are collectives, or none
    // does.
    Plan trial_plan;
    agree_on_failure(topology.member(), [&] {
      inject_build_fault(BuildFault::before_build, topology.world_rank());
      config = instantiate(c.config, trial_values(space, trial.genome));
      config.run.seed = derive_seed(c.seed, {seed_trial, static_cast<std::uint64_t>(trial.id)});
      trial_plan = plan_on_run_layout(config, topology.plan());
    });
    global_batch = trial_plan.global_batch();
    group.emplace(config, data, topology, trial_plan, c.threads, c.trace);
    trainer = &*group->trainer;
    trainer->set_evaluation_hook(serve);
    SessionSettings settings;
    settings.checkpoint_dir = trial_checkpoints(c, trial.id);
    settings.checkpoint = c.config.checkpoint;
    settings.epochs = config.training.epochs;
    settings.label = fmt::format("trial {}: ", trial.id);
    settings.checkpoint_last_epoch = false;
    settings.trace = c.trace;
    settings.steps_log = trial_dir(c, trial.id) / "steps.jsonl";
    settings.meta.put_text("kind", "trial");
    settings.meta.put_int("stage", c.stage_index);
    settings.meta.put_int("trial", trial.id);
    settings.meta.put_int("generation", trial.generation + 1);
    StepWork work;
    work.serve = serve;
    // The time limit counts the trial's time in earlier allocations too.
    if (spec.trial_timeout_s > 0)
      work.over_limit = [&] { return session->elapsed_seconds() > spec.trial_timeout_s; };
    work.stop_over_limit = [&] {
      throw TrialOverTime(
          fmt::format("stopped in epoch {} of {} after {:.1f} s: over "
                      "trial_timeout_s {}",
                      trainer->position().epoch, config.training.epochs, session->elapsed_seconds(),
                      spec.trial_timeout_s));
    };
    session.emplace(*trainer, topology, c.signals, std::move(settings), std::move(work));
  };
  const bool leader = topology.member().rank() == 0;
  const std::filesystem::path results = trial_dir(c, trial.id);
  // The trial's result goes into the search's journal: its checkpoints are no longer needed.
  auto forget_checkpoints = [&] {
    session->wait();
    std::error_code ignored;
    if (leader) std::filesystem::remove_all(trial_checkpoints(c, trial.id), ignored);
  };
  auto train = [&] {
    TrialOutcome o;
    std::optional<RunOutput> curve;  // the trial's validation curve, an epoch a line
    try {
      session->resume();
      if (leader) {
        curve.emplace(RunOutput::inside_checked_run(results));
        curve->keep_metrics_before(trainer->position().epoch);
      }
      auto fitness_of = [&](const EpochMetrics& m) {
        return spec.fitness == "val_loss" ? m.val_loss : m.val_accuracy;
      };
      try {
        session->run(config.training.epochs, {}, [&](const EpochMetrics& m) {
          if (curve) curve->append_metrics(m, trainer->device());
          // Every epoch's value goes to the pruner, whose history the journal keeps; after the
          // last one there is nothing left to save by stopping.
          if (channel.stop_after_epoch(m.epoch, fitness_of(m)) && m.epoch < config.training.epochs)
            throw TrialPruned{m.epoch, fitness_of(m)};
        });
      } catch (const TrialPruned& p) {
        o.status = TrialStatus::pruned;
        o.reason = fmt::format("stopped by the {} rule after epoch {} of {}",
                               to_string(spec.prune.rule), p.epoch, config.training.epochs);
      }
      const EpochMetrics& m = trainer->last_epoch();
      o.fitness = fitness_of(m);
      o.val_accuracy = m.val_accuracy;
      o.test_accuracy = m.test_accuracy;
      o.epochs = m.epoch;
      session->save_final_weights(results / "weights.h5");
    } catch (const TrialOverTime& e) {
      o.status = TrialStatus::timeout;
      o.reason = e.what();
      o.epochs = trainer->position().epoch;  // the epoch it stopped in counts as spent
    } catch (const DivergedError&) {
      forget_checkpoints();
      throw;
    } catch (const ConfigError&) {
      forget_checkpoints();
      throw;
    }
    forget_checkpoints();
    return o;
  };
  TrialOutcome o = run_guarded_trial(topology.member(), trial.id, build, train);
  o.seconds = seconds_since(start);
  o.global_batch = global_batch;
  return o;
}

}  // namespace strata
