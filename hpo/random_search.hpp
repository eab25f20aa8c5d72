// Random search: independent uniform samples of the space.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hpo/search.hpp"

namespace strata {

struct RandomConfig {
  int trials = 100;
  int batch_size = 1;  // trials handed out at once: the parallel slots of the scheduler
  std::optional<double> target;
  Direction direction = Direction::maximize;
  std::uint64_t seed = 0;
  int max_epochs = 0;  // 0: no limit
};

// Independent uniform samples; trial i draws from its own stream, so the trials do not depend on
// the batch size.
class RandomSearch : public Search {
 public:
  RandomSearch(SearchSpace space, RandomConfig config);

 private:
  bool waits_for_results() const override { return config_.target.has_value(); }
  std::vector<Proposal> propose(int max_count) override;
  void absorb(std::span<const Trial> batch) override;
  std::string finished_reason() const override;

  RandomConfig config_;
  int issued_ = 0;
};

}  // namespace strata
