// The steady state shared by the model-based searches (TPE, Gaussian process): random trials
// first, then one proposal from a model of every result so far for each member group set free.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hpo/search.hpp"

namespace strata {

// The settings every model-based search has (TpeConfig and GpConfig extend them).
struct ModelSearchConfig {
  int trials = 100;  // proposals in all, repeats included
  int startup = 10;  // random trials before the model
  int slots = 1;     // trainings in flight, one per member group
  std::optional<double> target;
  Direction direction = Direction::maximize;
  std::uint64_t seed = 0;  // the run seed
  int max_epochs = 0;      // 0: no limit
};

// Throws std::invalid_argument naming the setting and its value, for the `search` named.
void validate(const ModelSearchConfig& config, const char* search);

// How a model-based search draws: which of the run's hpo streams, and whether the startup trials
// are one Latin hypercube (latin_hypercube) rather than independent samples.
struct ModelSearchDraws {
  HpoStream stream = hpo_tpe;
  bool latin_startup = false;
};

// The first `startup` trials are random; after them (and once a training has succeeded, so that
// there is something to model) each free slot gets model_proposal(). What it proposes depends on
// the order results come in, which the journal keeps. History lines come every `slots` results.
class ModelSearch : public Search {
 protected:
  // `config` must be valid (validate).
  ModelSearch(SearchSpace space, const ModelSearchConfig& config, ModelSearchDraws draws);

 private:
  // A proposal from the results so far; trials in flight are in trials() without a report.
  virtual Genome model_proposal(Rng& rng) const = 0;

  int concurrent_trainings() const override { return settings_.slots; }
  std::vector<Proposal> propose(int max_count) override;
  void absorb(std::span<const Trial> batch) override;
  std::string finished_reason() const override;

  ModelSearchConfig settings_;
  ModelSearchDraws draws_;
  int proposed_ = 0;
  int read_ = 0;
  std::vector<Trial> since_line_;
};

}  // namespace strata
