#include "jobs/search_setup.hpp"

#include <algorithm>
#include <optional>
#include <utility>

#include "hpo/genetic_search.hpp"
#include "hpo/gp_search.hpp"
#include "hpo/grid_search.hpp"
#include "hpo/objectives.hpp"
#include "hpo/random_search.hpp"
#include "hpo/steady_state_search.hpp"
#include "hpo/tpe_search.hpp"

namespace strata {

SearchSpace search_space_of(const Config& config, const HpoSpec& spec) {
  if (config.objective) return objective_space(config.objective->name, config.objective->dims);
  return SearchSpace{spec.space};
}

Direction direction_of(const HpoSpec& spec, bool objective) {
  const bool maximize = spec.direction_given ? spec.maximize : spec.maximize && !objective;
  return maximize ? Direction::maximize : Direction::minimize;
}

namespace {

std::optional<double> target_of(const HpoSpec& spec) {
  return spec.has_target ? std::optional(spec.target) : std::nullopt;
}

// `groups`: the member groups of the allocation that started the search, which an asynchronous
// schedule keeps busy.
GeneticConfig genetic_config_of(const HpoSpec& spec, std::uint64_t seed, int groups,
                                bool objective) {
  GeneticConfig g;
  g.population = spec.population;
  g.generations = spec.generations;
  g.tournament = spec.tournament;
  g.crossover_rate = spec.crossover_rate;
  g.blend_alpha = spec.blend_alpha;
  g.mutation_sigma = spec.mutation_sigma;
  g.mutation_rate = spec.mutation_rate;
  g.mutation_probability = spec.mutation_probability;
  g.mutation_decay = spec.mutation_decay;
  g.step_adaptation = spec.step_adaptation;
  g.elitism = spec.elites;
  g.demes = spec.demes;
  g.migration_interval = spec.demes > 1 ? spec.migration_interval : 0;
  g.migrants = spec.migrants;
  g.patience = spec.patience;
  g.schedule = spec.schedule == SearchSchedule::asynchronous ? GeneticSchedule::asynchronous
                                                             : GeneticSchedule::generational;
  g.slots = std::max(groups, 1);
  g.surrogate_candidates = spec.surrogate_candidates;
  g.target = target_of(spec);
  g.max_trainings = spec.max_trainings;
  g.max_epochs = spec.max_epochs;
  g.direction = direction_of(spec, objective);
  g.seed = seed;
  return g;
}

// The settings the model-based searches (TpeConfig, GpConfig) share.
template <typename ModelConfig>
ModelConfig model_search_config(const HpoSpec& spec, std::uint64_t seed, int groups,
                                Direction direction) {
  ModelConfig c;
  c.trials = spec.trials;
  if (spec.startup_trials > 0) c.startup = spec.startup_trials;  // else the search's own default
  c.slots = std::max(groups, 1);
  c.target = target_of(spec);
  c.direction = direction;
  c.seed = seed;
  c.max_epochs = spec.max_epochs;
  return c;
}

}  // namespace

std::unique_ptr<Search> make_search(const HpoSpec& spec, SearchSpace space, std::uint64_t seed,
                                    int groups, bool objective) {
  const Direction direction = direction_of(spec, objective);
  switch (spec.algorithm) {
    case SearchAlgorithm::random:
      return std::make_unique<RandomSearch>(
          std::move(space),
          RandomConfig{spec.trials, groups, target_of(spec), direction, seed, spec.max_epochs});
    case SearchAlgorithm::grid:
      return std::make_unique<GridSearch>(std::move(space),
                                          GridConfig{spec.grid_points, groups, spec.max_trainings,
                                                     target_of(spec), direction, spec.max_epochs});
    case SearchAlgorithm::tpe: {
      auto t = model_search_config<TpeConfig>(spec, seed, groups, direction);
      t.multivariate = spec.multivariate;
      return std::make_unique<TpeSearch>(std::move(space), t);
    }
    case SearchAlgorithm::gp:
      return std::make_unique<GpSearch>(
          std::move(space), model_search_config<GpConfig>(spec, seed, groups, direction));
    case SearchAlgorithm::genetic:
    case SearchAlgorithm::pbt:  // pbt_stage runs it: no search of trials
      break;
  }
  return make_genetic_search(std::move(space), genetic_config_of(spec, seed, groups, objective));
}

int planned_trainings(const HpoSpec& spec, const SearchSpace& space) {
  double planned = 0;
  switch (spec.algorithm) {
    case SearchAlgorithm::random:
    case SearchAlgorithm::tpe:
    case SearchAlgorithm::gp:
      return spec.trials;
    case SearchAlgorithm::pbt:
      return spec.population;
    case SearchAlgorithm::grid:
      planned = 1;
      for (const auto& axis : grid_axes(space, spec.grid_points))
        planned *= static_cast<double>(axis.size());
      break;
    case SearchAlgorithm::genetic:
      planned = genetic_proposals(genetic_config_of(spec, 0, 1, false));
      break;
  }
  if (spec.max_trainings > 0) planned = std::min<double>(planned, spec.max_trainings);
  return static_cast<int>(std::min(planned, 2e9));
}

}  // namespace strata
