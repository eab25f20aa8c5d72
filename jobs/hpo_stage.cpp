#include "jobs/hpo_stage.hpp"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <stdexcept>

#include <fmt/format.h>

#include "core/atomic_file.hpp"
#include "core/clock.hpp"
#include "core/config_names.hpp"
#include "core/errors.hpp"
#include "core/rng.hpp"
#include "hpo/genetic_search.hpp"
#include "hpo/gp_search.hpp"
#include "hpo/grid_search.hpp"
#include "hpo/objectives.hpp"
#include "hpo/pruning.hpp"
#include "hpo/random_search.hpp"
#include "hpo/steady_state_search.hpp"
#include "hpo/tpe_search.hpp"
#include "hpo/trial_log.hpp"
#include "hpo/trial_scheduler.hpp"
#include "jobs/checkpoint_store.hpp"
#include "jobs/commands.hpp"
#include "jobs/hpo_trial.hpp"
#include "jobs/pbt_stage.hpp"
#include "jobs/run_plan.hpp"
#include "jobs/training_session.hpp"

namespace strata {

namespace {

SearchSpace search_space_of(const Config& config, const HpoSpec& spec) {
  if (config.objective) return objective_space(config.objective->name, config.objective->dims);
  return SearchSpace{spec.space};
}

Direction direction_of(const HpoSpec& spec, bool objective) {
  const bool maximize = spec.direction_given ? spec.maximize : spec.maximize && !objective;
  return maximize ? Direction::maximize : Direction::minimize;
}

std::optional<double> target_of(const HpoSpec& spec) {
  return spec.has_target ? std::optional(spec.target) : std::nullopt;
}

// `groups`: the member groups of the allocation that started the search, which an asynchronous
// schedule keeps busy.
GeneticConfig genetic_config_of(const HpoSpec& spec, std::uint64_t seed, int groups,
                                bool objective) {
  GeneticConfig g;
  g.population = spec.population;
  g.generations = spec.generations;
  g.tournament = spec.tournament;
  g.crossover_rate = spec.crossover_rate;
  g.blend_alpha = spec.blend_alpha;
  g.mutation_sigma = spec.mutation_sigma;
  g.mutation_rate = spec.mutation_rate;
  g.mutation_probability = spec.mutation_probability;
  g.mutation_decay = spec.mutation_decay;
  g.step_adaptation = spec.step_adaptation;
  g.elitism = spec.elites;
  g.demes = spec.demes;
  g.migration_interval = spec.demes > 1 ? spec.migration_interval : 0;
  g.migrants = spec.migrants;
  g.patience = spec.patience;
  g.schedule = spec.schedule == SearchSchedule::asynchronous ? GeneticSchedule::asynchronous
                                                             : GeneticSchedule::generational;
  g.slots = std::max(groups, 1);
  g.surrogate_candidates = spec.surrogate_candidates;
  g.target = target_of(spec);
  g.max_trainings = spec.max_trainings;
  g.max_epochs = spec.max_epochs;
  g.direction = direction_of(spec, objective);
  g.seed = seed;
  return g;
}

// More trials than this in a GP search earn a note on what its proposals cost.
constexpr int long_gp_search = 1000;

// The settings the model-based searches (TpeConfig, GpConfig) share.
template <typename ModelConfig>
ModelConfig model_search_config(const HpoSpec& spec, std::uint64_t seed, int groups,
                                Direction direction) {
  ModelConfig c;
  c.trials = spec.trials;
  c.startup = spec.startup_trials;
  c.slots = std::max(groups, 1);
  c.target = target_of(spec);
  c.direction = direction;
  c.seed = seed;
  c.max_epochs = spec.max_epochs;
  return c;
}

std::unique_ptr<Search> make_search(const HpoSpec& spec, SearchSpace space, std::uint64_t seed,
                                    int groups, bool objective) {
  const Direction direction = direction_of(spec, objective);
  switch (spec.algorithm) {
    case SearchAlgorithm::random:
      return std::make_unique<RandomSearch>(
          std::move(space),
          RandomConfig{spec.trials, groups, target_of(spec), direction, seed, spec.max_epochs});
    case SearchAlgorithm::grid:
      return std::make_unique<GridSearch>(std::move(space),
                                          GridConfig{spec.grid_points, groups, spec.max_trainings,
                                                     target_of(spec), direction, spec.max_epochs});
    case SearchAlgorithm::tpe: {
      auto t = model_search_config<TpeConfig>(spec, seed, groups, direction);
      t.multivariate = spec.multivariate;
      return std::make_unique<TpeSearch>(std::move(space), t);
    }
    case SearchAlgorithm::gp:
      return std::make_unique<GpSearch>(
          std::move(space), model_search_config<GpConfig>(spec, seed, groups, direction));
    case SearchAlgorithm::genetic:
    case SearchAlgorithm::pbt:  // pbt_stage runs it: no search of trials
      break;
  }
  return make_genetic_search(std::move(space), genetic_config_of(spec, seed, groups, objective));
}

// The weights of the keep_top best trials stay in trials/<id>/weights.h5; a trial that drops out
// of them loses its weights file (its curve stays).
class KeptWeights {
 public:
  KeptWeights(std::filesystem::path trials, int keep) : trials_(std::move(trials)), keep_(keep) {}
  // After the result of `trial_id` came in.
  void update(const Search& search, int trial_id) {
    const Trial& t = search.trials()[static_cast<std::size_t>(trial_id)];
    on_disk_.insert(t.id);
    prune(search);
  }
  // After a resumed search replayed its journal: every trial done may have weights.
  void replayed(const Search& search) {
    for (const Trial& t : search.trials())
      if (t.reported) on_disk_.insert(t.id);
    prune(search);
  }

 private:
  void prune(const Search& search) {
    std::set<int> kept;
    for (const Trial& t : search.top(keep_)) kept.insert(t.id);
    for (auto it = on_disk_.begin(); it != on_disk_.end();) {
      if (kept.contains(*it)) {
        ++it;
        continue;
      }
      std::error_code ignored;
      std::filesystem::remove(trials_ / std::to_string(*it) / "weights.h5", ignored);
      it = on_disk_.erase(it);
    }
  }

  std::filesystem::path trials_;
  int keep_;
  std::set<int> on_disk_;
};

// best.yaml (the config with the best values, runnable as it is) and best_weights.h5 in the
// search's directory.
SearchResults publish_best(const StageContext& c, const HpoSpec& spec, const Search& search) {
  const Trial best = *search.best();
  const std::filesystem::path dir(c.config.output.dir);
  SearchResults results;
  results.keep_top = spec.keep_top;
  results.best_config = "best.yaml";
  results.best_weights = "best_weights.h5";
  const std::string text = fmt::format(
      "# The best trial of the search in {} (trial {}, {} {}), as a plain config:\n"
      "#   strata run {}\n"
      "# trains it again from the start (with run.seed, not the trial's own seed). Its weights "
      "are\n"
      "# in {}.\n",
      dir.string(), best.id, spec.fitness, best.fitness, (dir / results.best_config).string(),
      (dir / results.best_weights).string());
  write_text_atomically(
      dir / results.best_config,
      text + trial_config_text(c.config, trial_values(search.space(), best.genome),
                               (dir / "best").string()));
  // Each kept trial's config, so that later stages (an ensemble of the top k) can train it again.
  for (const Trial& t : search.top(spec.keep_top)) {
    const auto trial = dir / "trials" / std::to_string(t.id);
    write_text_atomically(
        trial / "config.yaml",
        trial_config_text(c.config, trial_values(search.space(), t.genome), trial.string()));
  }
  const auto source = dir / "trials" / std::to_string(best.id) / "weights.h5";
  replace_atomically(dir / results.best_weights, [&](const std::filesystem::path& temporary) {
    std::error_code ec;
    std::filesystem::copy_file(source, temporary, std::filesystem::copy_options::overwrite_existing,
                               ec);
    if (ec)
      throw DataError(fmt::format("cannot copy the best trial's weights {} to {}: {}",
                                  source.string(), temporary.string(), ec.message()));
  });
  return results;
}

// The trainings the search will run unless it stops early, for the ETA: elites are not trained
// again.
int planned_trainings(const HpoSpec& spec, const SearchSpace& space) {
  double planned = 0;
  switch (spec.algorithm) {
    case SearchAlgorithm::random:
    case SearchAlgorithm::tpe:
    case SearchAlgorithm::gp:
      return spec.trials;
    case SearchAlgorithm::pbt:
      return spec.population;
    case SearchAlgorithm::grid:
      planned = 1;
      for (const auto& axis : grid_axes(space, spec.grid_points))
        planned *= static_cast<double>(axis.size());
      break;
    case SearchAlgorithm::genetic:
      planned = genetic_proposals(genetic_config_of(spec, 0, 1, false));
      break;
  }
  if (spec.max_trainings > 0) planned = std::min<double>(planned, spec.max_trainings);
  return static_cast<int>(std::min(planned, 2e9));
}

}  // namespace

void hpo_stage(const StageContext& c, const HpoSpec& spec) {
  if (spec.algorithm == SearchAlgorithm::pbt) {
    pbt_stage(c, spec);
    return;
  }
  const Config& config = c.config;
  const Topology& topology = c.topology;
  const RunOutput* output = c.output;
  const bool coordinator = topology.world_rank() == 0;
  const int groups = topology.plan().groups;
  const SearchSpace space = search_space_of(config, spec);
  // Random and grid batches are as large as the first allocation's groups, so that a restart on
  // another number of groups hands out the same batches.
  const auto search =
      make_search(spec, space, config.run.seed, c.first_groups, config.objective.has_value());
  std::optional<TrainingData> data;
  if (!config.objective)
    data.emplace(load_training_data(config));  // one split for all trials, so fitnesses compare
  std::optional<TrialLog> log;
  std::optional<CheckpointStore> snapshots;
  // The pruning rule's history of every trial's values by epoch, on the coordinator.
  std::optional<Pruner> pruner;
  if (coordinator && spec.prune.rule != PruneRule::none)
    pruner.emplace(spec.prune, direction_of(spec, config.objective.has_value()));
  KeptWeights kept_weights(std::filesystem::path(config.output.dir) / "trials", spec.keep_top);
  int done = 0, failed = 0, pruned = 0;
  std::string first_failure;
  int first_failure_id = 0;
  if (coordinator) {
    // The journal of an earlier allocation (trials.jsonl, and the search's last snapshot) is
    // replayed: the search goes on with the same population, history and random streams.
    log.emplace(output->dir(), search->space(), true);
    snapshots.emplace(output->checkpoints_dir() / fmt::format("stage{}", c.stage_index) / "search",
                      config.checkpoint.keep);
    std::vector<TrialResult> results = log->recovered();
    if (const auto snapshot = snapshots->load_newest([](const std::string& why) {
          fmt::print(stderr, "strata: skipping a damaged search checkpoint: {}\n", why);
        })) {
      // The log is written before each snapshot, so it holds the snapshot's results unless it
      // was damaged: those it lacks go after its own, in the snapshot's order.
      std::set<int> logged;
      for (const TrialResult& r : results) logged.insert(r.trial_id);
      for (const TrialResult& r : Search::results_of(snapshot->state, "search"))
        if (!logged.contains(r.trial_id)) results.push_back(r);
    }
    if (!results.empty()) {
      search->replay(results);
      log->check_replay(*search);
      if (pruner)
        for (const auto& [id, curve] : log->curves()) pruner->restore(id, curve);
      if (!config.objective) kept_weights.replayed(*search);
      done = static_cast<int>(results.size());
      for (const TrialResult& r : results) failed += std::isnan(r.fitness) ? 1 : 0;
      pruned = log->pruned_rows();
      fmt::print(
          "[resume] hpo: {} trials replayed from the journal ({} failed), now in {} {}; {} to run "
          "again from their checkpoints or their start\n",
          results.size(), failed,
          spec.algorithm == SearchAlgorithm::genetic ? "generation" : "batch",
          search->history().size() + 1, search->unfinished().size());
    }
    fmt::print("[hpo] {} search over {} parameters on {} member groups, {}\n",
               to_string(spec.algorithm), space.params.size(), groups,
               config.objective ? "evaluating a function" : "training " + trainings_device(config));
    // Past a few hundred results each GP proposal refits for about 0.4 s on one core: a long
    // search of cheap trainings would spend its time proposing.
    if (spec.algorithm == SearchAlgorithm::gp && spec.trials > long_gp_search)
      fmt::print(
          "[hpo] note: {} trials; past {} results each gp proposal refits a Gaussian process "
          "(about 0.4 s), where tpe or genetic propose in milliseconds\n",
          spec.trials, GpConfig{}.max_observations);
    std::fflush(stdout);
  }
  const int planned = planned_trainings(spec, space);
  const auto start = Clock::now();
  auto last_print = start;
  std::optional<int> best_shown;
  std::size_t generations_shown = coordinator ? search->history().size() : 0;
  auto generation_start = start;
  auto save_snapshot = [&] {
    StateDict state;
    search->save_state(state, "search");
    state.put_text("meta/kind", "search");
    state.put_int("meta/stage", c.stage_index);
    state.put_int("meta/generation", static_cast<std::int64_t>(search->history().size()));
    snapshots->save(state);
  };
  // Repeated genomes took an earlier result without training: a row each in the journal.
  // A resumed search resolves them again from the journal: only those a kill kept from it are new.
  auto log_cached = [&] {
    for (const Trial& copy : search->take_cached())
      if (!log->has(copy.id))
        log->append(copy, TrialLog::cached_outcome(
                              copy, search->trials()[static_cast<std::size_t>(copy.copy_of)]));
  };
  SchedulerStats stats;
  std::string stopped;
  try {
    stats = run_trials(
        topology, *search,
        [&](const Trial& trial, const TrialChannel& channel) {
          return config.objective
                     ? evaluate_function(*config.objective, config.run.seed, trial, channel.serve)
                     : train_trial(c, spec, space, *data, trial, channel);
        },
        [&](const Trial& trial, const TrialOutcome& finished) {
          TrialOutcome outcome = finished;
          if (pruner) outcome.curve = pruner->curve(trial.id);
          log->append(trial, outcome);
          log_cached();
          if (!config.objective) kept_weights.update(*search, trial.id);
          const std::size_t generations_before = generations_shown;
          ++done;
          if (outcome.status == TrialStatus::pruned) ++pruned;
          if (outcome.status != TrialStatus::ok && outcome.status != TrialStatus::pruned) {
            ++failed;
            // The lowest trial id: the same on every run, whatever order the results came in.
            if (first_failure.empty() || trial.id < first_failure_id) {
              first_failure_id = trial.id;
              first_failure = fmt::format("trial {}: {}: {}", trial.id, to_string(outcome.status),
                                          outcome.reason);
            }
          }
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
          if (generations_shown > generations_before) save_snapshot();
          const auto best = search->best();
          // A line when the best improves, a trial fails, or progress_seconds have passed: a search
          // of thousands of function evaluations must not print thousands of lines.
          const bool improved = best && (!best_shown || *best_shown != best->id);
          const bool finished_well =
              outcome.status == TrialStatus::ok || outcome.status == TrialStatus::pruned;
          if (!improved && finished_well &&
              seconds_since(last_print) < config.output.progress_seconds)
            return;
          last_print = Clock::now();
          if (best) best_shown = best->id;
          const double per_trial = seconds_since(start) / done;
          const int left = std::max(0, planned - done);
          const std::string which = spec.algorithm == SearchAlgorithm::genetic
                                        ? fmt::format("gen {}/{} trial {}", trial.generation + 1,
                                                      spec.generations, trial.id)
                                        : fmt::format("trial {}", trial.id);
          fmt::print(
              "[hpo] {} on group {}: {} {} in {:.1f}s | {}/{} done, {} failed | best {} ({}) | "
              "ETA {}\n",
              which, outcome.member_group, to_string(outcome.status),
              outcome.status == TrialStatus::ok ? fmt::format("{:.4g}", outcome.fitness)
                                                : outcome.reason,
              outcome.seconds, done, planned, failed,
              best ? fmt::format("{:.4g}", best->fitness) : "none",
              best ? describe(search->space(), best->genome) : "",
              format_duration(left * per_trial / groups));
          std::fflush(stdout);
        },
        Assignment::dynamic, [&] { return c.signals != nullptr && c.signals->requested(); },
        spec.prune.rule == PruneRule::none
            ? EpochVerdict{}
            : EpochVerdict([&](int trial_id, int epoch, double value) {
                return pruner->report(trial_id, epoch, value);
              }));
  } catch (const Interrupted& e) {
    if (coordinator) {
      log_cached();
      save_snapshot();
      snapshots->wait();
    }
    stopped = e.what();
  }
  // A stop signal throws on the coordinator and on the groups it stopped mid-trial; the others
  // return. All learn it here, before the collective below, and leave together.
  if (topology.world().allreduce_max(stopped.empty() ? 0 : 1) > 0)
    throw Interrupted(stopped.empty() ? std::string("the search stopped on a signal") : stopped);
  if (coordinator) {
    log_cached();
    save_snapshot();
    snapshots->wait();
    std::optional<SearchResults> results;
    if (!config.objective && search->best()) results = publish_best(c, spec, *search);
    write_hpo_summary(output->dir() / "hpo_summary.json", *search, stats.wall_seconds,
                      results ? &*results : nullptr);
    fmt::print("[hpo] {} trainings{}{} in {}, stopped: {}; busy {:.0f}% of rank 0's time\n",
               search->trainings(),
               search->cached() > 0
                   ? fmt::format(" ({} repeated genomes took an earlier result)", search->cached())
                   : "",
               config.objective
                   ? ""
                   : fmt::format(", {} epochs{}", search->epochs(),
                                 spec.prune.rule == PruneRule::none
                                     ? ""
                                     : fmt::format(", {} stopped early by the {} rule", pruned,
                                                   to_string(spec.prune.rule))),
               format_duration(stats.wall_seconds), search->stop_reason(),
               100.0 * stats.busy_seconds / std::max(stats.wall_seconds, 1e-9));
    if (results)
      fmt::print("[hpo] best: {}/{} (train it again: strata run {}), weights {}/{}\n",
                 output->dir().string(), results->best_config,
                 (output->dir() / results->best_config).string(), output->dir().string(),
                 results->best_weights);
  }
  // A search in which every trial failed has no result for a later stage, and a job script must
  // not take it for success. Every rank learns it from the coordinator and leaves alike.
  std::string all_failed;
  if (coordinator && !search->best() && search->trainings() > 0)
    all_failed = fmt::format(
        "every one of the {} trials of the search failed; the first: {} (trials.csv has each "
        "reason)",
        search->trainings(), first_failure.empty() ? "see trials.csv" : first_failure);
  topology.world().broadcast_string(all_failed, 0);
  if (!all_failed.empty()) throw SearchFailed(all_failed);
}

}  // namespace strata
