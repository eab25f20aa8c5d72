// The search's record on disk: trials.csv and trials.jsonl, a row per training as it ends, and
// hpo_summary.json.
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "hpo/search.hpp"

namespace strata {

// cached: the trial repeats an earlier one's genome and took its result without training.
// pruned: the pruning rule stopped it after an epoch; its fitness is that epoch's.
enum class TrialStatus { ok, failed, timeout, cached, pruned };

const char* to_string(TrialStatus status);

// How one training ended, as the scheduler learns it from the member group that ran it.
struct TrialOutcome {
  int member_group = 0;
  TrialStatus status = TrialStatus::ok;
  std::string reason;  // why it failed or timed out; empty when ok
  double fitness = 0.0;
  double val_accuracy = 0.0;
  double test_accuracy = 0.0;
  double seconds = 0.0;
  int global_batch = 0;  // samples per optimizer step, K x D x local batch; 0 for a function
  int epochs = 0;        // epochs trained (in every allocation); 0 for a function
  // The pruning metric after each epoch, as the coordinator's pruner heard it (empty without
  // pruning): the journal keeps it so that a resumed pruner knows every earlier trial.
  std::vector<double> curve;
};

// trials.jsonl is the search's journal: a row per result, flushed as it ends; trials.csv holds the
// same rows for spreadsheets.
class TrialLog {
 public:
  // A cached trial's row: the result of the trial it repeats, no training of its own.
  static TrialOutcome cached_outcome(const Trial& copy, const Trial& original);

  // Creates (truncates) trials.csv and trials.jsonl in `dir`; the CSV header names every parameter.
  // Each row's `ended_s` counts from here: create the log as the search starts. With `resume`, the
  // complete rows of an earlier attempt's trials.jsonl are kept (a line cut short by a kill is
  // dropped), trials.csv is rewritten from them, and `ended_s` goes on from the last of them.
  TrialLog(const std::filesystem::path& dir, const SearchSpace& space, bool resume = false);

  // The results of the rows kept on resume, in the order they were written, which is the order
  // the search read them (NaN: failed or timed out); cached rows are no results of their own.
  const std::vector<TrialResult>& recovered() const { return recovered_; }
  // How many of the rows kept on resume are of trials the pruning rule stopped.
  int pruned_rows() const { return pruned_rows_; }
  // The pruning curves of the rows kept on resume, by trial id.
  const std::map<int, std::vector<double>>& curves() const { return curves_; }
  // Whether the journal has a row for the trial (a cached one included).
  bool has(int trial_id) const { return logged_.contains(trial_id); }
  // After the search replayed recovered(): throws DataError naming the first kept row whose
  // parameters differ from the trial the replay made, which means the journal is another
  // search's, or its order was lost.
  void check_replay(const Search& search) const;

  // Appends the trial to both files and flushes them, so that a killed job keeps every finished
  // row.
  void append(const Trial& trial, const TrialOutcome& outcome);

 private:
  const SearchSpace& space_;
  std::vector<TrialResult> recovered_;
  std::set<int> logged_;
  std::map<int, std::string> kept_params_;  // trial id -> its row's params as JSON text
  std::map<int, std::vector<double>> curves_;
  int pruned_rows_ = 0;
  std::ofstream csv_, jsonl_;
  std::chrono::steady_clock::time_point opened_ = std::chrono::steady_clock::now();
};

// What a search of trainings leaves for later use, relative to its output directory.
struct SearchResults {
  std::string best_config;   // best.yaml: a plain config with the best values substituted
  std::string best_weights;  // the best trial's final weights
  int keep_top = 0;  // the weights of this many best trials are kept, trials/<id>/weights.h5
};

// hpo_summary.json: the best individual and its parameters, fitness per generation (best, mean),
// the trainings it took to reach the target (null if never), why the search stopped, and its wall
// time; with `results`, where best.yaml and the best weights are, and the top keep_top trials.
void write_hpo_summary(const std::filesystem::path& path, const Search& search, double wall_seconds,
                       const SearchResults* results = nullptr);

}  // namespace strata
