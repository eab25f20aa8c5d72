// The genetic search: a generational GA on islands, or its asynchronous steady state.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hpo/genetic_operators.hpp"
#include "hpo/search.hpp"

namespace strata {

// generational: a generation is bred once the last one is evaluated (with elites and demes).
// asynchronous: the steady state, with no generation barrier: each result frees a member group,
// which gets a child bred at once from the population so far (SteadyStateSearch).
enum class GeneticSchedule { generational, asynchronous };

struct GeneticConfig {
  int population = 20;                // individuals per generation, all demes together
  int generations = 10;               // the initial random generation included
  int tournament = 3;                 // contestants per tournament (k)
  double crossover_rate = 0.7;        // chance that a pair of parents is blended rather than copied
  double blend_alpha = 0.45;          // BLX-alpha
  double mutation_sigma = 0.1;        // as a fraction of each parameter's range
  double mutation_rate = 0.2;         // chance that each gene mutates
  double mutation_probability = 0.3;  // chance that a child is mutated at all (DEAP's mutpb)
  double mutation_decay = 1.0;        // mutation_sigma's factor per generation (scheduled_sigma)
  double step_adaptation = 1.0;  // self-adaptation of each child's step: tau = it / sqrt(genes)
  int elitism = 1;               // best individuals of each deme kept unchanged, not re-evaluated
  int demes = 1;                 // islands, sharing the population as evenly as possible
  int migration_interval = 0;    // generations between ring migrations; 0: never
  int migrants = 1;              // individuals each deme sends to the next
  int patience = 0;              // generations without a better best before stopping; 0: never
  GeneticSchedule schedule = GeneticSchedule::generational;
  int slots = 1;  // asynchronous: trainings in flight, one per member group
  // Surrogate assistance: each child is the one a TPE model of the results so far scores highest
  // of this many bred; 0 or 1: off.
  int surrogate_candidates = 0;
  std::optional<double> target;  // stop once a fitness reaches it
  int max_trainings = 0;         // 0: no limit
  Direction direction = Direction::maximize;
  std::uint64_t seed = 0;  // the run seed
  int max_epochs = 0;      // 0: no limit
};

// Throws std::invalid_argument naming the setting and its value.
void validate(const GeneticConfig& config);

// A generational GA on islands: each deme keeps its elites, breeds the rest by tournament,
// blend crossover and Gaussian mutation, and every migration_interval generations sends its best
// to the next deme in a ring.
class GeneticSearch : public Search {
 public:
  GeneticSearch(SearchSpace space, GeneticConfig config);

  const GeneticConfig& config() const { return config_; }
  // The population after the last complete generation, by deme.
  const std::vector<Deme>& demes() const { return demes_; }
  // Generations completed so far.
  int generation() const { return generation_; }

 private:
  std::vector<Proposal> propose(int max_count) override;
  void absorb(std::span<const Trial> batch) override;
  std::string finished_reason() const override;

  int deme_size(int deme) const;

  GeneticConfig config_;
  std::vector<Deme> demes_;
  std::vector<Deme> next_;  // the elites of the generation being evaluated
  int generation_ = 0;
  Stall stall_;
};

}  // namespace strata
