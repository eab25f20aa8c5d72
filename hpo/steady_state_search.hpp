// The asynchronous genetic search: a steady-state GA that breeds one child whenever a member
// group is free, so that no group waits for a generation to finish.
#pragma once

#include <limits>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hpo/genetic_search.hpp"
#include "hpo/search.hpp"

namespace strata {

// The trials a genetic search of this config proposes before it stops on `generations`: the
// first generation, then (population - elitism x demes) children per later one. The asynchronous
// schedule proposes as many, so that both spend the same budget.
int genetic_proposals(const GeneticConfig& config);

// A steady-state GA (DEAP's and LBANN's asynchronous variants): the first `population` trials
// are random; after them every free slot gets one child of two tournament winners from the
// population of results so far (mate, then maybe_mutate, as the generational search breeds), and
// each result replaces the population's worst if it is better (replace_worst). `slots` trainings
// are in flight at once. What it proposes depends on the order in which results are reported;
// Search's journal keeps that order. History lines come every `population` results.
class SteadyStateSearch : public Search {
 public:
  SteadyStateSearch(SearchSpace space, GeneticConfig config);

  const GeneticConfig& config() const { return config_; }
  // The individuals that survive so far, at most `population`.
  const Deme& population() const { return population_; }

 private:
  int concurrent_trainings() const override { return config_.slots; }
  std::vector<Proposal> propose(int max_count) override;
  void absorb(std::span<const Trial> batch) override;
  std::string finished_reason() const override;

  // A history line over the results read since the last one.
  void close_line();

  GeneticConfig config_;
  int budget_ = 0;  // genetic_proposals(config_)
  Deme population_;
  int proposed_ = 0;
  int lines_ = 0;
  std::vector<Trial> since_line_;  // results read since the last history line
  Stall stall_;
};

// The genetic search of this config's schedule.
std::unique_ptr<Search> make_genetic_search(SearchSpace space, const GeneticConfig& config);

}  // namespace strata
