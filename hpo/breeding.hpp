// Breeding one child of a population, alone or screened by a TPE model (the surrogate-assisted
// genetic search): shared by the generational and the steady-state schedules.
#pragma once

#include "hpo/genetic_operators.hpp"
#include "hpo/genetic_search.hpp"
#include "hpo/search.hpp"
#include "hpo/tpe_search.hpp"

namespace strata {

// One child: two tournament winners (config.tournament), mate (its first child, with
// config.crossover_rate and blend_alpha), then maybe_mutate.
Offspring breed_child(const Deme& population, const GeneticConfig& config,
                      const MutationSettings& mutation, const SearchSpace& space, Rng& rng);

// The child that `model` scores highest of `candidates` bred by breed_child (the first among
// equals): the GA proposes, the density ratio of good to bad results so far filters. An empty
// model (no success yet) breeds one child.
Offspring breed_screened(const Deme& population, const GeneticConfig& config,
                         const MutationSettings& mutation, const SearchSpace& space,
                         const TpeModel& model, int candidates, Rng& rng);

}  // namespace strata
