// The search an hpo stage's spec describes (its space, direction and algorithm with its settings),
// and the trainings it plans, for the stage's ETA.
#pragma once

#include <cstdint>
#include <memory>

#include "core/config.hpp"
#include "core/search_params.hpp"
#include "hpo/genetic_operators.hpp"
#include "hpo/search.hpp"

namespace strata {

// The objective function's space where the config evaluates one, else the spec's.
SearchSpace search_space_of(const Config& config, const HpoSpec& spec);

// `objective`: the trials evaluate a function, which is minimised unless the spec says otherwise.
Direction direction_of(const HpoSpec& spec, bool objective);

// `groups`: the member groups of the allocation that started the search. Random and grid batches
// are that large, so that a restart on another number of groups hands out the same batches; the
// model-based searches and an asynchronous schedule keep that many trials in flight. Not for
// algorithm pbt, which pbt_stage runs.
std::unique_ptr<Search> make_search(const HpoSpec& spec, SearchSpace space, std::uint64_t seed,
                                    int groups, bool objective);

// The trainings the search will run unless it stops early: elites are not trained again.
int planned_trainings(const HpoSpec& spec, const SearchSpace& space);

}  // namespace strata
