#include "hpo/pruning.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

#include "hpo/bad_setting.hpp"

namespace strata {

void validate(const PruneSettings& s) {
  if (s.after_epochs < 1) bad_setting("prune", "after_epochs", s.after_epochs, "must be >= 1");
  if (s.min_trials < 1) bad_setting("prune", "min_trials", s.min_trials, "must be >= 1");
  if (s.reduction_factor < 2)
    bad_setting("prune", "reduction_factor", s.reduction_factor, "must be >= 2");
}

bool median_stops(double value, std::span<const double> others, int min_trials,
                  Direction direction) {
  std::vector<double> known;
  for (const double v : others)
    if (!std::isnan(v)) known.push_back(v);
  if (static_cast<int>(known.size()) < min_trials) return false;
  // A failed value (NaN) is worse than any median.
  if (std::isnan(value)) return true;
  std::sort(known.begin(), known.end());
  const std::size_t n = known.size();
  const double median = n % 2 == 1 ? known[n / 2] : 0.5 * (known[n / 2 - 1] + known[n / 2]);
  return better(median, value, direction);
}

bool asha_stops(double value, std::span<const double> at_rung, int reduction_factor,
                Direction direction) {
  if (std::isnan(value)) return true;
  std::vector<double> ranked(at_rung.begin(), at_rung.end());
  std::sort(ranked.begin(), ranked.end(),
            [&](double a, double b) { return better(a, b, direction); });
  const std::size_t keep =
      std::max<std::size_t>(1, ranked.size() / static_cast<std::size_t>(reduction_factor));
  return better(ranked[keep - 1], value, direction);
}

bool is_rung(int epoch, int after_epochs, int reduction_factor) {
  for (long long rung = after_epochs; rung <= epoch; rung *= reduction_factor)
    if (rung == epoch) return true;
  return false;
}

Pruner::Pruner(PruneSettings settings, Direction direction)
    : settings_(settings), direction_(direction) {
  validate(settings_);
}

bool Pruner::report(int trial_id, int epoch, double value) {
  auto& at_epoch = by_epoch_[epoch];
  at_epoch[trial_id] = value;
  if (settings_.rule == PruneRule::none || epoch < settings_.after_epochs) return false;
  if (settings_.rule == PruneRule::median) {
    std::vector<double> others;
    for (const auto& [id, v] : at_epoch)
      if (id != trial_id) others.push_back(v);
    return median_stops(value, others, settings_.min_trials, direction_);
  }
  if (!is_rung(epoch, settings_.after_epochs, settings_.reduction_factor)) return false;
  std::vector<double> at_rung;
  for (const auto& [id, v] : at_epoch) at_rung.push_back(v);
  return asha_stops(value, at_rung, settings_.reduction_factor, direction_);
}

std::vector<double> Pruner::curve(int trial_id) const {
  std::vector<double> out;
  for (const auto& [epoch, values] : by_epoch_) {
    const auto v = values.find(trial_id);
    if (v == values.end()) continue;
    out.resize(static_cast<std::size_t>(epoch), std::nan(""));
    out[static_cast<std::size_t>(epoch - 1)] = v->second;
  }
  return out;
}

void Pruner::restore(int trial_id, std::span<const double> curve) {
  for (std::size_t e = 0; e < curve.size(); ++e)
    if (!std::isnan(curve[e])) by_epoch_[static_cast<int>(e + 1)][trial_id] = curve[e];
}

}  // namespace strata
