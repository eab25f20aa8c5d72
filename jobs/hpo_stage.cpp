#include "jobs/hpo_stage.hpp"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <optional>
#include <set>
#include <stdexcept>

#include <fmt/format.h>

#include "core/clock.hpp"
#include "core/config_names.hpp"
#include "core/errors.hpp"
#include "hpo/gp_search.hpp"
#include "hpo/pruning.hpp"
#include "hpo/trial_log.hpp"
#include "hpo/trial_scheduler.hpp"
#include "jobs/checkpoint_store.hpp"
#include "jobs/group_training.hpp"
#include "jobs/hpo_trial.hpp"
#include "jobs/pbt_stage.hpp"
#include "jobs/progress_lines.hpp"
#include "jobs/run_plan.hpp"
#include "jobs/search_results.hpp"
#include "jobs/search_setup.hpp"

namespace strata {

namespace {

// More trials than this in a GP search earn a note on what its proposals cost.
constexpr int long_gp_search = 1000;

// One search of an hpo stage on every rank: each member group trains the trials it is given, and
// the coordinator (world rank 0) keeps the journal, the snapshots, the pruning rule's history and
// the progress lines.
class SearchRun {
 public:
  SearchRun(const StageContext& c, const HpoSpec& spec);
  // Collective over the world: throws Interrupted on a stop signal, SearchFailed when every trial
  // failed, on every rank alike.
  void run();

 private:
  bool coordinator() const { return c_.topology.world_rank() == 0; }
  bool objective() const { return c_.config.objective.has_value(); }
  void resume();
  void announce() const;
  TrialOutcome evaluate(const Trial& trial, const TrialChannel& channel) const;
  void record(const Trial& trial, const TrialOutcome& finished);
  void count(const Trial& trial, const TrialOutcome& outcome);
  void report_generations();
  void report_progress(const Trial& trial, const TrialOutcome& outcome);
  void report_running(const TrialsInFlight& running);
  std::string eta() const;
  void save_snapshot();
  void log_cached();
  void publish(const SchedulerStats& stats);
  void require_a_result() const;

  const StageContext& c_;
  const HpoSpec& spec_;
  const SearchSpace space_;
  std::unique_ptr<Search> search_;
  std::optional<TrainingData> data_;  // one split for all trials, so fitnesses compare
  std::optional<TrialLog> log_;
  std::optional<CheckpointStore> snapshots_;
  std::optional<Pruner> pruner_;  // the pruning rule's history of each trial's values by epoch
  KeptWeights kept_weights_;
  int planned_ = 0;
  int done_ = 0, failed_ = 0, pruned_ = 0;
  std::string first_failure_;
  int first_failure_id_ = 0;
  Clock::time_point start_, last_print_, generation_start_;
  std::optional<int> best_shown_;
  std::size_t generations_shown_ = 0;
};

// Random and grid batches are as large as the first allocation's groups, so that a restart on
// another number of groups hands out the same batches.
SearchRun::SearchRun(const StageContext& c, const HpoSpec& spec)
    : c_(c),
      spec_(spec),
      space_(search_space_of(c.config, spec)),
      search_(make_search(spec, space_, c.seed, c.first_groups, objective())),
      kept_weights_(std::filesystem::path(c.config.output.dir) / "trials", spec.keep_top),
      planned_(planned_trainings(spec, space_)) {
  if (!objective()) data_.emplace(load_training_data(c.config));
  if (!coordinator()) return;
  if (spec.prune.rule != PruneRule::none)
    pruner_.emplace(spec.prune, direction_of(spec, objective()));
  log_.emplace(c.output->dir(), search_->space(), true);
  snapshots_.emplace(c.output->checkpoints_dir() / fmt::format("stage{}", c.stage_index) / "search",
                     c.config.checkpoint.keep);
}

// The journal of an earlier allocation (trials.jsonl, and the search's last snapshot) is replayed:
// the search goes on with the same population, history and random streams.
void SearchRun::resume() {
  std::vector<TrialResult> results = log_->recovered();
  if (const auto snapshot = snapshots_->load_newest([](const std::string& why) {
        fmt::print(stderr, "strata: skipping a damaged search checkpoint: {}\n", why);
      })) {
    // The log is written before each snapshot, so it holds the snapshot's results unless it was
    // damaged: those it lacks go after its own, in the snapshot's order.
    std::set<int> logged;
    for (const TrialResult& r : results) logged.insert(r.trial_id);
    for (const TrialResult& r : Search::results_of(snapshot->state, "search"))
      if (!logged.contains(r.trial_id)) results.push_back(r);
  }
  if (results.empty()) return;
  search_->replay(results);
  log_->check_replay(*search_);
  if (pruner_)
    for (const auto& [id, curve] : log_->curves()) pruner_->restore(id, curve);
  if (!objective()) kept_weights_.replayed(*search_);
  done_ = static_cast<int>(results.size());
  for (const TrialResult& r : results) failed_ += std::isnan(r.fitness) ? 1 : 0;
  pruned_ = log_->pruned_rows();
  fmt::print(
      "[resume] hpo: {} trials replayed from the journal ({} failed), now in {} {}; {} to run "
      "again from their checkpoints or their start\n",
      results.size(), failed_, spec_.algorithm == SearchAlgorithm::genetic ? "generation" : "batch",
      search_->history().size() + 1, search_->unfinished().size());
}

void SearchRun::announce() const {
  fmt::print("[hpo] {} search over {} parameters on {} member groups, {}\n",
             to_string(spec_.algorithm), space_.params.size(), c_.topology.plan().groups,
             objective() ? "evaluating a function" : "training " + trainings_device(c_.config));
  // Past a few hundred results each GP proposal refits for about 0.4 s on one core: a long search
  // of cheap trainings would spend its time proposing.
  if (spec_.algorithm == SearchAlgorithm::gp && spec_.trials > long_gp_search)
    fmt::print(
        "[hpo] note: {} trials; past {} results each gp proposal refits a Gaussian process "
        "(about 0.4 s), where tpe or genetic propose in milliseconds\n",
        spec_.trials, GpConfig{}.max_observations);
  std::fflush(stdout);
}

TrialOutcome SearchRun::evaluate(const Trial& trial, const TrialChannel& channel) const {
  const Config& config = c_.config;
  return objective() ? evaluate_function(*config.objective, c_.seed, trial, channel.serve)
                     : train_trial(c_, spec_, space_, *data_, trial, channel);
}

void SearchRun::save_snapshot() {
  StateDict state;
  search_->save_state(state, "search");
  state.put_text("meta/kind", "search");
  state.put_int("meta/stage", c_.stage_index);
  state.put_int("meta/generation", static_cast<std::int64_t>(search_->history().size()));
  snapshots_->save(state);
}

// Repeated genomes took an earlier result without training: a row each in the journal. A resumed
// search resolves them again from the journal: only those a kill kept from it are new.
void SearchRun::log_cached() {
  for (const Trial& copy : search_->take_cached())
    if (!log_->has(copy.id))
      log_->append(copy, TrialLog::cached_outcome(
                             copy, search_->trials()[static_cast<std::size_t>(copy.copy_of)]));
}

// On the coordinator, as each result comes in.
void SearchRun::record(const Trial& trial, const TrialOutcome& finished) {
  TrialOutcome outcome = finished;
  if (pruner_) outcome.curve = pruner_->curve(trial.id);
  log_->append(trial, outcome);
  log_cached();
  if (!objective()) kept_weights_.update(*search_, trial.id);
  count(trial, outcome);
  const std::size_t generations_before = generations_shown_;
  report_generations();
  if (generations_shown_ > generations_before) save_snapshot();
  report_progress(trial, outcome);
}

void SearchRun::count(const Trial& trial, const TrialOutcome& outcome) {
  ++done_;
  if (outcome.status == TrialStatus::pruned) ++pruned_;
  if (outcome.status == TrialStatus::ok || outcome.status == TrialStatus::pruned) return;
  ++failed_;
  // The lowest trial id: the same on every run, whatever order the results came in.
  if (first_failure_.empty() || trial.id < first_failure_id_) {
    first_failure_id_ = trial.id;
    first_failure_ =
        fmt::format("trial {}: {}: {}", trial.id, to_string(outcome.status), outcome.reason);
  }
}

// The search closes a generation when its last result arrives: one line per generation. Random
// and grid batches are no generations: their progress lines suffice.
void SearchRun::report_generations() {
  if (spec_.algorithm != SearchAlgorithm::genetic) generations_shown_ = search_->history().size();
  for (; generations_shown_ < search_->history().size(); ++generations_shown_) {
    const GenerationStats& g = search_->history()[generations_shown_];
    fmt::print(
        "[hpo] generation {}/{} done in {:.1f}s: best {:.4g}, mean {:.4g}, best so far {:.4g}, {} "
        "failed\n",
        g.generation + 1, spec_.generations, seconds_since(generation_start_), g.best, g.mean,
        g.best_so_far, g.failed);
    generation_start_ = Clock::now();
  }
}

// A line when the best improves, a trial fails, or progress_seconds have passed: a search of
// thousands of function evaluations must not print thousands of lines.
void SearchRun::report_progress(const Trial& trial, const TrialOutcome& outcome) {
  const auto best = search_->best();
  const bool improved = best && (!best_shown_ || *best_shown_ != best->id);
  const bool finished_well =
      outcome.status == TrialStatus::ok || outcome.status == TrialStatus::pruned;
  if (!improved && finished_well && seconds_since(last_print_) < c_.config.output.progress_seconds)
    return;
  last_print_ = Clock::now();
  if (best) best_shown_ = best->id;
  const std::string which =
      spec_.algorithm == SearchAlgorithm::genetic
          ? fmt::format("gen {}/{} trial {}", trial.generation + 1, spec_.generations, trial.id)
          : fmt::format("trial {}", trial.id);
  fmt::print(
      "[hpo] {} on group {}: {} {} in {:.1f}s | {}/{} done, {} failed | best {} ({}) | {}\n", which,
      outcome.member_group, to_string(outcome.status),
      outcome.status == TrialStatus::ok ? fmt::format("{:.4g}", outcome.fitness) : outcome.reason,
      outcome.seconds, done_, planned_, failed_,
      best ? fmt::format("{:.4g}", best->fitness) : "none",
      best ? describe(search_->space(), best->genome) : "", eta());
  std::fflush(stdout);
}

// Between results, a line every progress_seconds: trainings of many minutes must not leave the
// log silent.
void SearchRun::report_running(const TrialsInFlight& running) {
  if (seconds_since(last_print_) < c_.config.output.progress_seconds) return;
  last_print_ = Clock::now();
  const auto best = search_->best();
  fmt::print("[hpo] {}/{} done, {} | best {} | {}\n", done_, planned_,
             describe_running(running(), [](int id) { return fmt::format("trial {}", id); }),
             best ? fmt::format("{:.4g}", best->fitness) : "none", eta());
  std::fflush(stdout);
}

std::string SearchRun::eta() const {
  if (done_ == 0) return "ETA -";
  const double per_trial = seconds_since(start_) / done_;
  const int left = std::max(0, planned_ - done_);
  return "ETA " + format_duration(left * per_trial / c_.topology.plan().groups);
}

// On the coordinator after the last trial: the last snapshot, the results and the summary line.
void SearchRun::publish(const SchedulerStats& stats) {
  log_cached();
  save_snapshot();
  snapshots_->wait();
  std::optional<SearchResults> results;
  if (!objective() && search_->best()) results = publish_best(c_, spec_, *search_);
  const RunOutput& output = *c_.output;
  write_hpo_summary(output.dir() / "hpo_summary.json", *search_, stats.wall_seconds,
                    results ? &*results : nullptr);
  fmt::print("[hpo] {} trainings{}{} in {}, stopped: {}; busy {:.0f}% of rank 0's time\n",
             search_->trainings(),
             search_->cached() > 0
                 ? fmt::format(" ({} repeated genomes took an earlier result)", search_->cached())
                 : "",
             objective() ? ""
                         : fmt::format(", {} epochs{}", search_->epochs(),
                                       spec_.prune.rule == PruneRule::none
                                           ? ""
                                           : fmt::format(", {} stopped early by the {} rule",
                                                         pruned_, to_string(spec_.prune.rule))),
             format_duration(stats.wall_seconds), search_->stop_reason(),
             100.0 * stats.busy_seconds / std::max(stats.wall_seconds, 1e-9));
  if (results)
    fmt::print("[hpo] best: {}/{} (train it again: strata run {}), weights {}/{}\n",
               output.dir().string(), results->best_config,
               (output.dir() / results->best_config).string(), output.dir().string(),
               results->best_weights);
}

// A search in which every trial failed has no result for a later stage, and a job script must not
// take it for success. Every rank learns it from the coordinator and leaves alike.
void SearchRun::require_a_result() const {
  std::string all_failed;
  if (coordinator() && !search_->best() && search_->trainings() > 0)
    all_failed = fmt::format(
        "every one of the {} trials of the search failed; the first: {} (trials.csv has each "
        "reason)",
        search_->trainings(), first_failure_.empty() ? "see trials.csv" : first_failure_);
  c_.topology.world().broadcast_string(all_failed, 0);
  if (!all_failed.empty()) throw SearchFailed(all_failed);
}

void SearchRun::run() {
  if (coordinator()) {
    resume();
    announce();
  }
  start_ = last_print_ = generation_start_ = Clock::now();
  generations_shown_ = coordinator() ? search_->history().size() : 0;
  SchedulerOptions options;
  options.stop_requested = [&] { return c_.signals != nullptr && c_.signals->requested(); };
  if (spec_.prune.rule != PruneRule::none)
    options.epoch_verdict = [&](int trial_id, int epoch, double value) {
      return pruner_->report(trial_id, epoch, value);
    };
  options.while_running = [&](const TrialsInFlight& running) { report_running(running); };
  SchedulerStats stats;
  std::string stopped;
  try {
    stats = run_trials(
        c_.topology, *search_,
        [&](const Trial& trial, const TrialChannel& channel) { return evaluate(trial, channel); },
        [&](const Trial& trial, const TrialOutcome& outcome) { record(trial, outcome); }, options);
  } catch (const Interrupted& e) {
    if (coordinator()) {
      log_cached();
      save_snapshot();
      snapshots_->wait();
    }
    stopped = e.what();
  }
  // A stop signal throws on the coordinator and on the groups it stopped mid-trial; the others
  // return. All learn it here, before the collective below, and leave together.
  if (c_.topology.world().allreduce_max(stopped.empty() ? 0 : 1) > 0)
    throw Interrupted(stopped.empty() ? std::string("the search stopped on a signal") : stopped);
  if (coordinator()) publish(stats);
  require_a_result();
}

}  // namespace

void hpo_stage(const StageContext& c, const HpoSpec& spec) {
  if (spec.algorithm == SearchAlgorithm::pbt) {
    pbt_stage(c, spec);
    return;
  }
  SearchRun(c, spec).run();
}

}  // namespace strata
