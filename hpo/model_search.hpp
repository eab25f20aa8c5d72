// The steady state shared by the model-based searches (TPE, Gaussian process): random trials
// first, then one proposal from a model of every result so far for each member group set free.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "hpo/search.hpp"

namespace strata {

struct ModelSearchSettings {
  int trials = 100;            // proposals in all, repeats included
  int startup = 10;            // random trials before the model
  int slots = 1;               // trainings in flight, one per member group
  HpoStream stream = hpo_tpe;  // which of the run's hpo streams the proposals draw from
  std::uint64_t seed = 0;      // the run seed
  // The startup trials as one Latin hypercube (latin_hypercube) rather than independent samples.
  bool latin_startup = false;
};

// The first `startup` trials are random; after them (and once a training has succeeded, so that
// there is something to model) each free slot gets model_proposal(). What it proposes depends on
// the order results come in, which the journal keeps. History lines come every `slots` results.
class ModelSearch : public Search {
 protected:
  ModelSearch(SearchSpace space, Direction direction, SearchLimits limits,
              ModelSearchSettings settings);

 private:
  // A proposal from the results so far; trials in flight are in trials() without a report.
  virtual Genome model_proposal(Rng& rng) const = 0;

  int concurrent_trainings() const override { return settings_.slots; }
  std::vector<Proposal> propose(int max_count) override;
  void absorb(std::span<const Trial> batch) override;
  std::string finished_reason() const override;

  ModelSearchSettings settings_;
  int proposed_ = 0;
  int read_ = 0;
  std::vector<Trial> since_line_;
};

}  // namespace strata
