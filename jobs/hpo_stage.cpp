#include "jobs/hpo_stage.hpp"

#include <array>
#include <chrono>
#include <cmath>
#include <memory>
#include <optional>
#include <span>
#include <stdexcept>
#include <thread>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "core/rng.hpp"
#include "core/trainer.hpp"
#include "hpo/objectives.hpp"
#include "hpo/trial_guard.hpp"
#include "hpo/trial_log.hpp"
#include "hpo/trial_scheduler.hpp"
#include "jobs/commands.hpp"
#include "jobs/run_plan.hpp"
#include "parallel/gradient_sync.hpp"
#include "parallel/model_parallel_layers.hpp"

namespace strata {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

SearchSpace search_space_of(const Config& config, const HpoSpec& spec) {
  if (config.objective) return objective_space(config.objective->name, config.objective->dims);
  SearchSpace space;
  for (const auto& p : spec.space) {
    ParamSpec s;
    s.name = p.name;
    s.kind = p.kind == SearchParamKind::uniform       ? ParamKind::uniform
             : p.kind == SearchParamKind::log_uniform ? ParamKind::log_uniform
             : p.kind == SearchParamKind::integer     ? ParamKind::integer
                                                      : ParamKind::choice;
    s.lo = p.lo;
    s.hi = p.hi;
    s.choices = p.choices;
    space.params.push_back(s);
  }
  return space;
}

std::unique_ptr<Search> make_search(const HpoSpec& spec, SearchSpace space, std::uint64_t seed,
                                    int groups, bool objective) {
  const bool maximize = spec.direction_given ? spec.maximize : spec.maximize && !objective;
  const Direction direction = maximize ? Direction::maximize : Direction::minimize;
  const std::optional<double> target = spec.has_target ? std::optional(spec.target) : std::nullopt;
  switch (spec.algorithm) {
    case SearchAlgorithm::random:
      return std::make_unique<RandomSearch>(
          std::move(space), RandomConfig{spec.trials, groups, target, direction, seed});
    case SearchAlgorithm::grid:
      return std::make_unique<GridSearch>(
          std::move(space),
          GridConfig{spec.grid_points, groups, spec.max_trainings, target, direction});
    case SearchAlgorithm::genetic:
      break;
  }
  GeneticConfig g;
  g.population = spec.population;
  g.generations = spec.generations;
  g.tournament = spec.tournament;
  g.crossover_rate = spec.crossover_rate;
  g.blend_alpha = spec.blend_alpha;
  g.mutation_sigma = spec.mutation_sigma;
  g.mutation_rate = spec.mutation_rate;
  g.elitism = spec.elites;
  g.demes = spec.demes;
  g.migration_interval = spec.demes > 1 ? spec.migration_interval : 0;
  g.migrants = spec.migrants;
  g.patience = spec.patience;
  g.target = target;
  g.max_trainings = spec.max_trainings;
  g.direction = direction;
  g.seed = seed;
  return std::make_unique<GeneticSearch>(std::move(space), g);
}

// A trial's values as the YAML scalars that replace the config's references.
std::map<std::string, std::string> trial_values(const SearchSpace& space, const Trial& trial) {
  std::map<std::string, std::string> values;
  for (std::size_t k = 0; k < space.params.size(); ++k) {
    const ParamSpec& p = space.params[k];
    const double v = trial.genome[k];
    values[p.name] = p.kind == ParamKind::choice    ? p.choices.at(static_cast<std::size_t>(v))
                     : p.kind == ParamKind::integer ? fmt::format("{}", std::llround(v))
                                                    : fmt::format("{}", v);
  }
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

// Thrown at a step boundary, alike on every rank of the group, when a trial runs over
// trial_timeout_s.
class TrialOverTime : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Whether a trial has run longer than its limit on any rank of its group, asked once per step.
// On a group of several ranks the answer must be the same everywhere, so the ranks vote: each
// step starts a non-blocking sum of the ranks' flags and reads the previous step's sum, which the
// step's own communication has completed by then. Every rank stops at the same step, one step
// after the first rank ran over, and no step waits for the vote. A vote still in flight when the
// trial ends is completed by the request's destructor, on every rank alike.
class OverTimeVote {
 public:
  OverTimeVote(const Communicator& member, Clock::time_point start, double limit_s)
      : member_(member), start_(start), limit_s_(limit_s) {}

  bool over() {
    const bool mine = seconds_since(start_) > limit_s_;
    if (member_.size() == 1) return mine;
    pending_.wait();
    const bool voted = flag_[0] > 0.0f;
    flag_[0] = mine ? 1.0f : 0.0f;
    pending_ = member_.iallreduce_sum(std::span<float>(flag_));
    return voted;
  }

 private:
  const Communicator& member_;
  Clock::time_point start_;
  double limit_s_;
  std::array<float, 1> flag_{0.0f};  // the buffer of the vote in flight
  Request pending_;                  // declared after flag_: completes before flag_ goes away
};

// Trains the trial's config on this member group. Every decision that ends it early (divergence,
// timeout) is taken alike on all ranks of the group, so none is left in a collective; errors
// become failed trials where run_guarded_trial finds that safe.
TrialOutcome train_trial(const Config& base, const HpoSpec& spec, const SearchSpace& space,
                         const TrainingData& data, const Topology& topology, int threads,
                         const Trial& trial, const std::function<void()>& serve) {
  const auto start = Clock::now();
  Config config;
  std::optional<DataParallelSync> sync;
  std::optional<Trainer> trainer;
  int global_batch = 0;
  int epoch = 0;
  OverTimeVote over_time(topology.member(), start, spec.trial_timeout_s);
  auto build = [&] {
    config = instantiate(base, trial_values(space, trial));
    config.run.seed =
        derive_seed(base.run.seed, {seed_trial, static_cast<std::uint64_t>(trial.id)});
    const Plan trial_plan = plan_on_run_layout(config, topology.plan());
    global_batch = trial_plan.global_batch();
    if (trial_plan.data > 1) sync.emplace(topology.data(), config.parallel.bucket_mib);
    const bool split_model = trial_plan.model > 1;
    trainer.emplace(config,
                    build_model(config, data,
                                split_model ? model_parallel_factory(topology.model(), config.file)
                                            : LayerFactory{}),
                    data, trial_plan, threads, sync ? &*sync : nullptr);
    if (sync) sync->attach(trainer->model().params());
    trainer->set_evaluation_hook(serve);
    trainer->set_step_hook([&] {
      serve();
      if (spec.trial_timeout_s > 0 && over_time.over())
        throw TrialOverTime(
            fmt::format("stopped in epoch {} of {} after {:.1f} s: over "
                        "trial_timeout_s {}",
                        epoch, config.training.epochs, seconds_since(start), spec.trial_timeout_s));
    });
  };
  auto train = [&] {
    TrialOutcome o;
    try {
      for (epoch = 1; epoch <= config.training.epochs; ++epoch) {
        const EpochMetrics m = trainer->run_epoch({});
        o.fitness = spec.fitness == "val_loss" ? m.val_loss : m.val_accuracy;
        o.val_accuracy = m.val_accuracy;
        o.test_accuracy = m.test_accuracy;
      }
    } catch (const TrialOverTime& e) {
      o.status = TrialStatus::timeout;
      o.reason = e.what();
    }
    return o;
  };
  TrialOutcome o = run_guarded_trial(topology.member(), trial.id, build, train);
  o.seconds = seconds_since(start);
  o.global_batch = global_batch;
  return o;
}

// The trainings the search will run unless it stops early, for the ETA: elites are not trained
// again.
int planned_trainings(const HpoSpec& spec, const SearchSpace& space) {
  double planned = 0;
  switch (spec.algorithm) {
    case SearchAlgorithm::random:
      return spec.trials;
    case SearchAlgorithm::grid:
      planned = 1;
      for (const auto& axis : grid_axes(space, spec.grid_points))
        planned *= static_cast<double>(axis.size());
      break;
    case SearchAlgorithm::genetic:
      planned = spec.population + static_cast<double>(spec.generations - 1) *
                                      std::max(0, spec.population - spec.elites * spec.demes);
      break;
  }
  if (spec.max_trainings > 0) planned = std::min<double>(planned, spec.max_trainings);
  return static_cast<int>(std::min(planned, 2e9));
}

std::string params_string(const SearchSpace& space, const Trial& t) {
  std::string text;
  for (std::size_t k = 0; k < space.params.size(); ++k)
    text += fmt::format("{}{}={}", k ? " " : "", space.params[k].name,
                        describe_value(space.params[k], t.genome[k]));
  return text;
}

}  // namespace

void hpo_stage(const Config& config, const HpoSpec& spec, const Topology& topology, int threads,
               const RunOutput* output) {
  const bool coordinator = topology.world_rank() == 0;
  const int groups = topology.plan().groups;
  const SearchSpace space = search_space_of(config, spec);
  const auto search =
      make_search(spec, space, config.run.seed, groups, config.objective.has_value());
  std::optional<TrainingData> data;
  if (!config.objective)
    data.emplace(load_training_data(config));  // one split for all trials, so fitnesses compare
  std::optional<TrialLog> log;
  if (coordinator) {
    log.emplace(output->dir(), search->space());
    fmt::print("[hpo] {} search over {} parameters on {} member groups\n",
               to_string(spec.algorithm), space.params.size(), groups);
    // A generation is a barrier: groups beyond its size have nothing to do.
    if (spec.algorithm == SearchAlgorithm::genetic && spec.population < groups)
      fmt::print(
          "[hpo] note: a generation of {} trials leaves {} of the {} member groups idle; a "
          "population of {} or more (better, several times that) keeps every group busy\n",
          spec.population, groups - spec.population, groups, groups);
    std::fflush(stdout);
  }
  const int planned = planned_trainings(spec, space);
  const auto start = Clock::now();
  auto last_print = start;
  int done = 0, failed = 0;
  std::optional<int> best_shown;
  std::size_t generations_shown = 0;
  auto generation_start = start;
  const auto stats = run_trials(
      topology, *search,
      [&](const Trial& trial, const std::function<void()>& serve) {
        return config.objective
                   ? evaluate_function(*config.objective, config.run.seed, trial, serve)
                   : train_trial(config, spec, space, *data, topology, threads, trial, serve);
      },
      [&](const Trial& trial, const TrialOutcome& outcome) {
        log->append(trial, outcome);
        ++done;
        if (outcome.status != TrialStatus::ok) ++failed;
        // The search closes a generation when its last result arrives: one line per generation.
        // Random and grid batches are no generations: their progress lines suffice.
        if (spec.algorithm != SearchAlgorithm::genetic)
          generations_shown = search->history().size();
        for (; generations_shown < search->history().size(); ++generations_shown) {
          const GenerationStats& g = search->history()[generations_shown];
          fmt::print(
              "[hpo] generation {}/{} done in {:.1f}s: best {:.4g}, mean {:.4g}, best so far "
              "{:.4g}, {} failed\n",
              g.generation + 1, spec.generations, seconds_since(generation_start), g.best, g.mean,
              g.best_so_far, g.failed);
          generation_start = Clock::now();
        }
        const auto best = search->best();
        // A line when the best improves, a trial fails, or progress_seconds have passed: a search
        // of thousands of function evaluations must not print thousands of lines.
        const bool improved = best && (!best_shown || *best_shown != best->id);
        if (!improved && outcome.status == TrialStatus::ok &&
            seconds_since(last_print) < config.output.progress_seconds)
          return;
        last_print = Clock::now();
        if (best) best_shown = best->id;
        const double per_trial = seconds_since(start) / done;
        const int left = std::max(0, planned - done);
        const std::string which = spec.algorithm == SearchAlgorithm::genetic
                                      ? fmt::format("gen {}/{} trial {}", trial.generation + 1,
                                                    spec.generations, trial.id)
                                      : fmt::format("trial {}/{}", trial.id + 1, planned);
        fmt::print(
            "[hpo] {} on group {}: {} {} in {:.1f}s | {} done, {} failed | best {} ({}) | ETA {}\n",
            which, outcome.member_group, to_string(outcome.status),
            outcome.status == TrialStatus::ok ? fmt::format("{:.4g}", outcome.fitness)
                                              : outcome.reason,
            outcome.seconds, done, failed, best ? fmt::format("{:.4g}", best->fitness) : "none",
            best ? params_string(search->space(), *best) : "",
            format_duration(left * per_trial / groups));
        std::fflush(stdout);
      });
  if (coordinator) {
    write_hpo_summary(output->dir() / "hpo_summary.json", *search, stats.wall_seconds);
    fmt::print("[hpo] {} trainings in {}, stopped: {}; busy {:.0f}% of rank 0's time\n",
               search->trainings(), format_duration(stats.wall_seconds), search->stop_reason(),
               100.0 * stats.busy_seconds / std::max(stats.wall_seconds, 1e-9));
  }
}

}  // namespace strata
