// Random search.
#include "hpo/random_search.hpp"

#include <algorithm>
#include <utility>

#include "core/rng.hpp"
#include "hpo/bad_setting.hpp"

namespace strata {

namespace {

SearchLimits random_limits(const RandomConfig& c) {
  if (c.trials < 1) bad_setting("random search", "trials", c.trials, "must be >= 1");
  if (c.batch_size < 1) bad_setting("random search", "batch_size", c.batch_size, "must be >= 1");
  return {0, c.max_epochs, c.target};
}

}  // namespace

RandomSearch::RandomSearch(SearchSpace space, RandomConfig config)
    : Search(std::move(space), config.direction, random_limits(config)), config_(config) {}

std::vector<Search::Proposal> RandomSearch::propose(int max_count) {
  const int count = std::min({config_.batch_size, config_.trials - issued_, max_count});
  std::vector<Proposal> out;
  for (int i = 0; i < count; ++i, ++issued_) {
    Rng rng(derive_seed(config_.seed, {seed_hpo, hpo_random, static_cast<std::uint64_t>(issued_)}));
    out.push_back({sample(space(), rng), issued_ / config_.batch_size, 0, 1.0});
  }
  return out;
}

void RandomSearch::absorb(std::span<const Trial> batch) {
  std::vector<double> fitness;
  for (const auto& t : batch) fitness.push_back(t.fitness);
  record_generation(batch.front().generation, fitness, batch);
}

std::string RandomSearch::finished_reason() const {
  return issued_ >= config_.trials ? "exhausted" : "";
}

}  // namespace strata
