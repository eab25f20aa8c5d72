// Grid search: every point of a grid over the space.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hpo/search.hpp"

namespace strata {

struct GridConfig {
  int points_per_real = 5;  // per uniform or log_uniform parameter (geometric for log_uniform)
  int batch_size = 1;
  int max_trainings = 0;  // 0: the whole grid
  std::optional<double> target;
  Direction direction = Direction::maximize;
  int max_epochs = 0;  // 0: no limit
};

// The values each parameter takes on the grid: evenly spaced reals (the midpoint when there is
// one point), every integer, every choice. Throws std::invalid_argument if the grid would exceed
// max_points.
std::vector<std::vector<double>> grid_axes(const SearchSpace& space, int points_per_real,
                                           double max_points = 1e7);

// Every point of the grid, in the order of nested loops with the last parameter innermost.
class GridSearch : public Search {
 public:
  GridSearch(SearchSpace space, GridConfig config);

  std::int64_t grid_size() const { return size_; }

 private:
  bool waits_for_results() const override { return config_.target.has_value(); }
  std::vector<Proposal> propose(int max_count) override;
  void absorb(std::span<const Trial> batch) override;
  std::string finished_reason() const override;

  GridConfig config_;
  std::vector<std::vector<double>> axes_;
  std::int64_t size_ = 0;
  std::int64_t issued_ = 0;
};

}  // namespace strata
