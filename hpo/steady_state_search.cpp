#include "hpo/steady_state_search.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "hpo/breeding.hpp"
#include "hpo/genetic_search.hpp"

namespace strata {

int genetic_proposals(const GeneticConfig& c) {
  const double later = std::max(0, c.population - c.elitism * c.demes);
  return static_cast<int>(
      std::min(2e9, c.population + static_cast<double>(c.generations - 1) * later));
}

namespace {

GeneticConfig asynchronous(GeneticConfig c) {
  c.schedule = GeneticSchedule::asynchronous;
  validate(c);
  return c;
}

}  // namespace

SteadyStateSearch::SteadyStateSearch(SearchSpace space, GeneticConfig config)
    : Search(std::move(space), config.direction,
             SearchLimits{config.max_trainings, config.max_epochs, config.target}),
      config_(asynchronous(config)),
      budget_(genetic_proposals(config_)) {}

std::vector<Search::Proposal> SteadyStateSearch::propose(int max_count) {
  if (max_count < 1 || !finished_reason().empty()) return {};
  // One stream per proposal: each child reads only the population at the moment it is bred.
  Rng rng(derive_seed(config_.seed,
                      {seed_hpo, hpo_steady_state, static_cast<std::uint64_t>(proposed_)}));
  ++proposed_;
  if (proposed_ <= config_.population || population_.empty())
    return {{sample(space(), rng), lines_, 0, 1.0}};
  const MutationSettings mutation{
      config_.mutation_probability,
      scheduled_sigma(config_.mutation_sigma, config_.mutation_decay, std::max(lines_, 1)),
      config_.mutation_rate, step_tau(config_.step_adaptation, space().params.size())};
  Offspring child =
      config_.surrogate_candidates > 1
          ? breed_screened(population_, config_, mutation, space(),
                           TpeModel(space(), trials(), config_.direction, TpeConfig{}),
                           config_.surrogate_candidates, rng)
          : breed_child(population_, config_, mutation, space(), rng);
  return {{std::move(child.genome), lines_, 0, child.step}};
}

void SteadyStateSearch::absorb(std::span<const Trial> batch) {
  for (const Trial& t : batch) {
    replace_worst(population_, {t.genome, t.fitness, t.id, t.step},
                  static_cast<std::size_t>(config_.population), config_.direction);
    since_line_.push_back(t);
  }
  const bool last = outstanding() == 0 && (limits_reached() || !finished_reason().empty());
  if (static_cast<int>(since_line_.size()) >= config_.population || (last && !since_line_.empty()))
    close_line();
}

void SteadyStateSearch::close_line() {
  record_generation(lines_, fitnesses_of(population_), since_line_);
  since_line_.clear();
  ++lines_;
  stall_.record(history().back().best, config_.direction);
}

std::string SteadyStateSearch::finished_reason() const {
  if (proposed_ >= budget_) return "generations";
  if (config_.patience > 0 && stall_.generations() >= config_.patience) return "patience";
  return {};
}

std::unique_ptr<Search> make_genetic_search(SearchSpace space, const GeneticConfig& config) {
  if (config.schedule == GeneticSchedule::asynchronous)
    return std::make_unique<SteadyStateSearch>(std::move(space), config);
  return std::make_unique<GeneticSearch>(std::move(space), config);
}

}  // namespace strata
