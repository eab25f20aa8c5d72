// Grid search and its axes.
#include "hpo/grid_search.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <utility>

#include <fmt/format.h>

#include "hpo/bad_setting.hpp"

namespace strata {

std::vector<std::vector<double>> grid_axes(const SearchSpace& space, int points_per_real,
                                           double max_points) {
  validate(space);
  if (points_per_real < 1)
    bad_setting("grid search", "points_per_real", points_per_real, "must be >= 1");
  double total = 1.0;
  for (const auto& p : space.params) {
    const bool real = p.kind == ParamKind::uniform || p.kind == ParamKind::log_uniform;
    total *= real ? points_per_real : cardinality(p);
  }
  if (total > max_points)
    throw std::invalid_argument(fmt::format(
        "grid search: the grid would have {} points, more than {}; use fewer points_per_real or "
        "narrower int ranges",
        total, max_points));
  std::vector<std::vector<double>> axes;
  for (const auto& p : space.params) {
    std::vector<double> axis;
    if (p.kind == ParamKind::uniform || p.kind == ParamKind::log_uniform) {
      const double a = to_search_scale(p, p.lo), b = to_search_scale(p, p.hi);
      for (int i = 0; i < points_per_real; ++i) {
        const double t =
            points_per_real == 1 ? 0.5 : static_cast<double>(i) / (points_per_real - 1);
        // The end points exactly: exp(log(lo)) need not give lo back.
        if (points_per_real > 1 && i == 0)
          axis.push_back(p.lo);
        else if (points_per_real > 1 && i == points_per_real - 1)
          axis.push_back(p.hi);
        else
          axis.push_back(clamp_value(p, from_search_scale(p, a + (b - a) * t)));
      }
    } else {
      const double first = p.kind == ParamKind::integer ? p.lo : 0.0;
      for (double v = 0; v < cardinality(p); ++v) axis.push_back(first + v);
    }
    axes.push_back(std::move(axis));
  }
  return axes;
}

namespace {

SearchLimits grid_limits(const GridConfig& c) {
  if (c.batch_size < 1) bad_setting("grid search", "batch_size", c.batch_size, "must be >= 1");
  return {c.max_trainings, c.max_epochs, c.target};
}

}  // namespace

GridSearch::GridSearch(SearchSpace space, GridConfig config)
    : Search(std::move(space), config.direction, grid_limits(config)),
      config_(config),
      axes_(grid_axes(this->space(), config.points_per_real)) {
  size_ = 1;
  for (const auto& a : axes_) size_ *= static_cast<std::int64_t>(a.size());
}

std::vector<Search::Proposal> GridSearch::propose(int max_count) {
  const auto count = std::min<std::int64_t>({config_.batch_size, size_ - issued_, max_count});
  std::vector<Proposal> out;
  for (std::int64_t i = 0; i < count; ++i, ++issued_) {
    Genome g(axes_.size());
    auto rest = issued_;
    for (std::size_t p = axes_.size(); p-- > 0;) {
      const auto n = static_cast<std::int64_t>(axes_[p].size());
      g[p] = axes_[p][static_cast<std::size_t>(rest % n)];
      rest /= n;
    }
    out.push_back({std::move(g), static_cast<int>(issued_ / config_.batch_size), 0, 1.0});
  }
  return out;
}

void GridSearch::absorb(std::span<const Trial> batch) {
  std::vector<double> fitness;
  for (const auto& t : batch) fitness.push_back(t.fitness);
  record_generation(batch.front().generation, fitness, batch);
}

std::string GridSearch::finished_reason() const {
  return issued_ >= size_ ? "exhausted" : "";
}

}  // namespace strata
