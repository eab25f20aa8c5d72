// Hyperparameter searches behind one batch interface: the protocol every search (genetic, random,
// grid, TPE, the Gaussian-process search) derives from.
#pragma once

#include <cstdint>
#include <deque>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "core/state.hpp"
#include "hpo/genetic_operators.hpp"
#include "hpo/search_space.hpp"

namespace strata {

// The coordinate after seed_hpo (core/rng.hpp): which part of the search a stream feeds.
enum HpoStream : std::uint64_t {
  hpo_genetic = 1,
  hpo_random = 2,
  hpo_eval_time = 3,
  hpo_steady_state = 4,
  hpo_tpe = 5,
  hpo_pbt = 6,
  hpo_gp = 7
};

// One evaluation of one genome. Trial ids count from 0 in the order trials are proposed. A trial
// whose genome (integers rounded, choices snapped) repeats an earlier one's is `cached`: it is
// never trained, and takes the earlier trial's result once that is in.
struct Trial {
  int id = -1;
  int generation = 0;  // the batch for random and grid search
  int deme = 0;
  Genome genome;
  double fitness = std::numeric_limits<double>::quiet_NaN();
  bool failed = false;
  bool reported = false;
  int training = -1;  // 0-based among the trainings handed out; -1 for a cached trial
  int copy_of = -1;   // a cached trial: the trial whose result it takes
  double step = 1.0;  // the genetic search's self-adapted mutation step of this genome
  int epochs = 0;     // epochs its training ran, once reported
  bool cached() const { return copy_of >= 0; }
};

// One line of the search's history, for hpo_summary.json and convergence plots.
struct GenerationStats {
  int generation = 0;
  int evaluated = 0;  // trials of this generation, failures included
  int failed = 0;
  double best = std::numeric_limits<double>::quiet_NaN();  // in the population after it
  double mean = std::numeric_limits<double>::quiet_NaN();  // over the population's successes
  double best_so_far = std::numeric_limits<double>::quiet_NaN();
  int trainings = 0;  // trainings so far, this generation's included
};

// One result as the search's journal keeps it; a journal lists them in the order the search read
// them.
struct TrialResult {
  int trial_id = -1;
  double fitness = std::numeric_limits<double>::quiet_NaN();  // NaN: failed
  int epochs = 0;  // epochs the training ran (max_epochs counts them)
  bool operator==(const TrialResult& other) const;
};

struct SearchLimits {
  int max_trainings = 0;  // 0: no limit
  int max_epochs = 0;     // epochs of all trainings together; 0: no limit
  std::optional<double> target;
};

// The protocol a scheduler drives, whatever the algorithm:
//   while (!search.done()) { for (auto& t : search.next_batch()) hand out t;
//                            on each result: search.report(id, fitness, failed); }
// (next_batch may hand out nothing and leave the search done: its proposals were all repeats.)
//
// Batch searches (generational genetic, random, grid) read each batch's results once the whole
// batch is in, batch after batch, in trial-id order, so the order in which evaluations finish never
// changes what comes next. One whose proposals depend on results (genetic) hands out no batch while
// one is outstanding; one whose proposals do not (random, grid) hands out the next batch at once,
// so that no group waits for the slowest trial of a batch, unless it has a target: how many
// batches would be out when the target is met depends on timing, and the search must come out the
// same however the groups finish.
//
// Steady-state searches (concurrent_trainings() > 0: the asynchronous genetic search) keep that
// many trainings in flight and read each result as it is reported: the report proposes the next
// training at once, from every result so far, so no group waits for another. What they propose
// then depends on the order of the results, and on nothing else: the journal keeps that order, and
// replaying it rebuilds the same search.
class Search {
 public:
  Search(SearchSpace space, Direction direction, SearchLimits limits);
  virtual ~Search() = default;
  Search(const Search&) = delete;
  Search& operator=(const Search&) = delete;

  // The next trials to evaluate; empty once done, once the target is met or the budget handed out,
  // and, for a search that waits for results, while some of the last batch are unreported. Cached
  // trials are left out (take_cached() returns them once resolved): a batch of nothing but repeats
  // is resolved at once and the search proposes again.
  std::vector<Trial> next_batch();
  // The cached trials resolved since the last call, for the trial log.
  std::vector<Trial> take_cached();
  // A result, in any order, with the epochs its training ran. A fitness that is NaN or infinite
  // counts as failed. Throws std::invalid_argument for an id that was not handed out or is
  // reported twice.
  void report(int trial_id, double fitness, bool failed = false, int epochs = 0);
  // No trial is outstanding and none will be handed out.
  bool done() const;
  // Why the search stopped ("target", "max_trainings", "max_epochs", "generations", "patience",
  // "exhausted"), or empty while it runs.
  std::string stop_reason() const;

  // The search's state is its journal: every result so far, in the order it was read. Proposals
  // are a function of the config and that sequence, so replaying the journal into a new search of
  // the same config rebuilds the population, demes, history, stall count and every RNG position
  // exactly (as Optuna's journal storage does). load_state must be called on a search that has
  // handed out nothing; the trials handed out again by the replay without a result are
  // unfinished() and must be evaluated next. A result for a trial the replay never reaches (a
  // journal of another config) throws DataError.
  void save_state(StateDict& out, const std::string& prefix) const;
  void load_state(const StateDict& in, const std::string& prefix);
  // Replays results as load_state does, each once its trial has been proposed, in the given
  // order. A batch search reads them by batch whatever their order; a steady-state one needs the
  // order in which they were reported.
  void replay(const std::vector<TrialResult>& results);
  // The results a save_state wrote, in the order the search read them; DataError if malformed.
  static std::vector<TrialResult> results_of(const StateDict& in, const std::string& prefix);
  // Trials handed out and not yet reported, in id order.
  std::vector<Trial> unfinished() const;

  int outstanding() const { return outstanding_; }
  // Trainings reported (cached trials are not trainings).
  int trainings() const { return reported_; }
  // Epochs the reported trainings ran.
  long long epochs() const { return epochs_; }
  // Trials that took an earlier trial's result instead of training.
  int cached() const { return cached_; }
  // The best successful trial so far; the earliest one among equals.
  std::optional<Trial> best() const;
  // The `k` best successful trials so far, best first; among equals the earliest first.
  std::vector<Trial> top(int k) const;
  // Trainings up to and including the first trial that met the target, if one did.
  std::optional<int> trainings_to_target() const { return trainings_to_target_; }
  const std::vector<Trial>& trials() const { return trials_; }
  const std::vector<GenerationStats>& history() const { return history_; }
  const SearchSpace& space() const { return space_; }
  Direction direction() const { return direction_; }

 protected:
  struct Proposal {
    Genome genome;
    int generation = 0;
    int deme = 0;
    double step = 1.0;
  };

  // Whether the next proposals depend on the results of the last batch.
  virtual bool waits_for_results() const { return true; }
  // 0: the batch protocol. n > 0: the steady state, n trainings in flight, each result read alone
  // as it is reported (absorb gets a batch of one) and its slot refilled at once.
  virtual int concurrent_trainings() const { return 0; }
  // The target is met, max_trainings handed out or max_epochs spent: the search proposes nothing
  // more.
  bool limits_reached() const;
  // Appends a history line: best and mean over `population`, counts from `batch`.
  void record_generation(int generation, std::span<const double> population,
                         std::span<const Trial> batch);

 private:
  // At most max_count genomes to evaluate next; empty only when finished_reason() is set.
  virtual std::vector<Proposal> propose(int max_count) = 0;
  // Every result of the oldest unread batch, in trial-id order.
  virtual void absorb(std::span<const Trial> batch) = 0;
  // Why the algorithm stopped by its own rules, or empty while it goes on.
  virtual std::string finished_reason() const = 0;

  bool meets_target(double fitness) const;
  // A cached trial takes its original's result.
  void resolve_copy(Trial& copy, const Trial& original);
  // Reads every batch whose trials are all reported, oldest first.
  void absorb_complete_batches();
  // Updates the best trial and the target with a result being read.
  void note_result(const Trial& t);
  // Turns proposals into trials: repeats become cached, the rest trainings, which it returns.
  std::vector<Trial> admit(std::vector<Proposal> proposals);
  // The steady state: proposes trainings until concurrent_trainings() are in flight.
  void fill_slots();

  SearchSpace space_;
  Direction direction_;
  SearchLimits limits_;
  std::vector<Trial> trials_;
  std::vector<GenerationStats> history_;
  std::size_t batch_begin_ = 0;         // the first trial of the oldest unread batch
  std::deque<std::size_t> batch_ends_;  // one past the last trial of each unread batch
  int outstanding_ = 0;
  int reported_ = 0;
  int handed_out_ = 0;  // trainings handed out
  int cached_ = 0;
  long long epochs_ = 0;
  std::map<Genome, int> first_with_genome_;         // clamped genome -> first trial's id
  std::map<int, std::vector<int>> copies_waiting_;  // original id -> its cached trials
  std::vector<int> cached_resolved_;                // for take_cached()
  std::vector<int> read_order_;  // the trainings whose results were read, in that order
  std::deque<int> ready_;        // the steady state: trainings proposed, not yet in a batch
  int best_id_ = -1;
  std::optional<int> trainings_to_target_;
};

}  // namespace strata
