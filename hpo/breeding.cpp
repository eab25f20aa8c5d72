#include "hpo/breeding.hpp"
#include "hpo/genetic_search.hpp"

#include <utility>

namespace strata {

Offspring breed_child(const Deme& population, const GeneticConfig& config,
                      const MutationSettings& mutation, const SearchSpace& space, Rng& rng) {
  const auto parents =
      select_tournament(fitnesses_of(population), config.tournament, 2, config.direction, rng);
  auto child = mate(population[parents[0]], population[parents[1]], config.crossover_rate,
                    config.blend_alpha, space, rng)
                   .first;
  return maybe_mutate(std::move(child), mutation, space, rng);
}

Offspring breed_screened(const Deme& population, const GeneticConfig& config,
                         const MutationSettings& mutation, const SearchSpace& space,
                         const TpeModel& model, int candidates, Rng& rng) {
  if (model.empty()) return breed_child(population, config, mutation, space, rng);
  Offspring best = breed_child(population, config, mutation, space, rng);
  double best_score = model.score(best.genome);
  for (int i = 1; i < candidates; ++i) {
    Offspring child = breed_child(population, config, mutation, space, rng);
    const double score = model.score(child.genome);
    if (score > best_score) {
      best = std::move(child);
      best_score = score;
    }
  }
  return best;
}

}  // namespace strata
