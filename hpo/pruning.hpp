// Early stopping of hopeless trainings: the median-stopping rule and asynchronous successive
// halving (ASHA), as Optuna's MedianPruner and SuccessiveHalvingPruner decide them.
#pragma once

#include <map>
#include <span>
#include <string>
#include <vector>

#include "core/search_params.hpp"
#include "hpo/genetic_operators.hpp"

namespace strata {

// Throws std::invalid_argument naming the setting and its value.
void validate(const PruneSettings& settings);

// The median rule: `value` is stopped if it is worse than the median of `others` (the values
// other trials had at the same epoch), once there are at least min_trials of them.
bool median_stops(double value, std::span<const double> others, int min_trials,
                  Direction direction);

// ASHA at a rung: with n values recorded at the rung (this trial's included), the trial goes on
// only if its value is at least as good as the max(1, n / eta)-th best of them.
bool asha_stops(double value, std::span<const double> at_rung, int reduction_factor,
                Direction direction);

// Whether `epoch` is an ASHA rung: after_epochs x eta^k for some k >= 0.
bool is_rung(int epoch, int after_epochs, int reduction_factor);

// The validation values of every trial at each of its epochs, as the member groups report them,
// and the rule's verdict on each new one. The verdict reads the values other trials reported
// before it, so it depends on timing; the trial log records it (status pruned, epochs).
class Pruner {
 public:
  Pruner(PruneSettings settings, Direction direction);

  // Records `value` of `trial_id` after `epoch` (1-based) and returns whether the rule stops the
  // trial there. A value reported again for the same trial and epoch (a trial resumed from a
  // checkpoint) replaces the old one.
  bool report(int trial_id, int epoch, double value);
  // The values a trial reported, epoch 1 first (NaN where an epoch was not reported).
  std::vector<double> curve(int trial_id) const;
  // Rebuilds the history from a finished trial's curve (a resumed search's journal).
  void restore(int trial_id, std::span<const double> curve);

  const PruneSettings& settings() const { return settings_; }

 private:
  PruneSettings settings_;
  Direction direction_;
  std::map<int, std::map<int, double>> by_epoch_;  // epoch -> trial id -> value
};

}  // namespace strata
