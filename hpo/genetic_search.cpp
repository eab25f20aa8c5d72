// The genetic search's settings check and its generational algorithm.
#include "hpo/genetic_search.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "hpo/bad_setting.hpp"
#include "hpo/breeding.hpp"

namespace strata {

void validate(const GeneticConfig& c) {
  const char* ga = "genetic search";
  if (c.population < 1) bad_setting(ga, "population", c.population, "must be >= 1");
  if (c.demes < 1) bad_setting(ga, "demes", c.demes, "must be >= 1");
  const int smallest = c.population / c.demes;
  if (c.elitism < 0) bad_setting(ga, "elitism", c.elitism, "must be >= 0");
  if (smallest < c.elitism + 1)
    bad_setting(ga, "population", c.population,
                "each deme needs more individuals than elitism, to breed at least one");
  if (c.generations < 1) bad_setting(ga, "generations", c.generations, "must be >= 1");
  if (c.tournament < 1) bad_setting(ga, "tournament", c.tournament, "must be >= 1");
  if (!(c.crossover_rate >= 0.0 && c.crossover_rate <= 1.0))
    bad_setting(ga, "crossover_rate", c.crossover_rate, "must be in [0, 1]");
  if (!(c.blend_alpha >= 0.0 && std::isfinite(c.blend_alpha)))
    bad_setting(ga, "blend_alpha", c.blend_alpha, "must be >= 0");
  if (!(c.mutation_sigma >= 0.0 && std::isfinite(c.mutation_sigma)))
    bad_setting(ga, "mutation_sigma", c.mutation_sigma, "must be >= 0");
  if (!(c.mutation_rate >= 0.0 && c.mutation_rate <= 1.0))
    bad_setting(ga, "mutation_rate", c.mutation_rate, "must be in [0, 1]");
  if (!(c.mutation_probability >= 0.0 && c.mutation_probability <= 1.0))
    bad_setting(ga, "mutation_probability", c.mutation_probability, "must be in [0, 1]");
  if (!(c.mutation_decay > 0.0 && c.mutation_decay <= 1.0))
    bad_setting(ga, "mutation_decay", c.mutation_decay, "must be in (0, 1]");
  if (!(c.step_adaptation >= 0.0 && std::isfinite(c.step_adaptation)))
    bad_setting(ga, "step_adaptation", c.step_adaptation, "must be >= 0");
  if (c.migration_interval < 0)
    bad_setting(ga, "migration_interval", c.migration_interval, "must be >= 0");
  if (c.migrants < 0 || c.migrants > smallest)
    bad_setting(ga, "migrants", c.migrants, "must be between 0 and the size of the smallest deme");
  if (c.patience < 0) bad_setting(ga, "patience", c.patience, "must be >= 0");
  if (c.slots < 1) bad_setting(ga, "slots", c.slots, "must be >= 1");
  if (c.surrogate_candidates < 0)
    bad_setting(ga, "surrogate_candidates", c.surrogate_candidates, "must be >= 0");
  if (c.schedule == GeneticSchedule::asynchronous && c.demes != 1)
    bad_setting(ga, "demes", c.demes,
                "the asynchronous schedule keeps one steady-state population: demes must be 1");
}

namespace {

SearchLimits genetic_limits(const GeneticConfig& c) {
  validate(c);
  return {c.max_trainings, c.max_epochs, c.target};
}

}  // namespace

GeneticSearch::GeneticSearch(SearchSpace space, GeneticConfig config)
    : Search(std::move(space), config.direction, genetic_limits(config)),
      config_(config),
      demes_(static_cast<std::size_t>(config.demes)),
      next_(static_cast<std::size_t>(config.demes)) {}

int GeneticSearch::deme_size(int deme) const {
  return config_.population / config_.demes + (deme < config_.population % config_.demes ? 1 : 0);
}

std::vector<Search::Proposal> GeneticSearch::propose(int max_count) {
  if (!finished_reason().empty()) return {};
  std::vector<Proposal> out;
  for (int d = 0; d < config_.demes; ++d) {
    // One stream per generation and deme: breeding reads only the completed population.
    Rng rng(
        derive_seed(config_.seed, {seed_hpo, hpo_genetic, static_cast<std::uint64_t>(generation_),
                                   static_cast<std::uint64_t>(d)}));
    auto& next = next_[static_cast<std::size_t>(d)];
    next.clear();
    if (generation_ == 0) {
      for (int i = 0; i < deme_size(d); ++i) out.push_back({sample(space(), rng), 0, d, 1.0});
      continue;
    }
    const auto& deme = demes_[static_cast<std::size_t>(d)];
    const auto fitness = fitnesses_of(deme);
    for (auto i : elites(fitness, std::min<int>(config_.elitism, static_cast<int>(deme.size())),
                         config_.direction))
      next.push_back(deme[i]);
    const int children = deme_size(d) - static_cast<int>(next.size());
    const MutationSettings mutation{
        config_.mutation_probability,
        scheduled_sigma(config_.mutation_sigma, config_.mutation_decay, generation_),
        config_.mutation_rate, step_tau(config_.step_adaptation, space().params.size())};
    if (config_.surrogate_candidates > 1) {
      // One model per generation, of every result so far.
      const TpeModel model(space(), trials(), config_.direction, TpeConfig{});
      if (!model.empty()) {
        for (int i = 0; i < children; ++i) {
          auto child = breed_screened(deme, config_, mutation, space(), model,
                                      config_.surrogate_candidates, rng);
          out.push_back({std::move(child.genome), generation_, d, child.step});
        }
        continue;
      }
    }
    const auto parents = select_tournament(fitness, config_.tournament, children + children % 2,
                                           config_.direction, rng);
    for (int i = 0; i < children; i += 2) {
      auto [c1, c2] = mate(deme[parents[i]], deme[parents[i + 1]], config_.crossover_rate,
                           config_.blend_alpha, space(), rng);
      c1 = maybe_mutate(std::move(c1), mutation, space(), rng);
      c2 = maybe_mutate(std::move(c2), mutation, space(), rng);
      out.push_back({std::move(c1.genome), generation_, d, c1.step});
      if (i + 1 < children) out.push_back({std::move(c2.genome), generation_, d, c2.step});
    }
  }
  // Beyond max_trainings the last generation is cut short; the search stops after it.
  if (out.size() > static_cast<std::size_t>(max_count)) out.resize(max_count);
  return out;
}

void GeneticSearch::absorb(std::span<const Trial> batch) {
  for (const auto& t : batch)
    next_[static_cast<std::size_t>(t.deme)].push_back({t.genome, t.fitness, t.id, t.step});
  std::swap(demes_, next_);
  for (auto& n : next_) n.clear();

  std::vector<double> population;
  for (const auto& deme : demes_)
    for (const auto& ind : deme) population.push_back(ind.fitness);
  record_generation(generation_, population, batch);

  stall_.record(history().back().best, config_.direction);

  // A generation cut short by max_trainings is the last, and its demes may be too small to migrate.
  bool whole = true;
  for (int d = 0; d < config_.demes; ++d)
    whole = whole && static_cast<int>(demes_[static_cast<std::size_t>(d)].size()) == deme_size(d);
  if (whole && config_.demes > 1 && config_.migration_interval > 0 &&
      (generation_ + 1) % config_.migration_interval == 0)
    migrate_ring(demes_, config_.migrants, config_.direction);
  ++generation_;
}

std::string GeneticSearch::finished_reason() const {
  if (generation_ >= config_.generations) return "generations";
  if (config_.patience > 0 && stall_.generations() >= config_.patience) return "patience";
  return {};
}

}  // namespace strata
