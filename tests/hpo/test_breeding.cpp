// Breeding one child, and the surrogate filter: of several children bred alike, the one a TPE
// model of the results so far scores highest.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "core/rng.hpp"
#include "hpo/breeding.hpp"
#include "hpo/genetic_search.hpp"
#include "hpo/objectives.hpp"

using namespace strata;

namespace {

// A population and a history of results on sphere in 2 dimensions: the good ones near 0.
struct Fixture {
  SearchSpace space = objective_space("sphere", 2);
  GeneticConfig config;
  MutationSettings mutation{1.0, 0.1, 0.5, 0.0};
  Deme population;
  std::vector<Trial> trials;
  Fixture() {
    config.direction = Direction::minimize;
    config.tournament = 2;
    Rng rng(4);
    for (int i = 0; i < 30; ++i) {
      Trial t;
      t.id = i;
      t.genome = sample(space, rng);
      t.fitness = sphere(t.genome);
      t.reported = true;
      t.training = i;
      trials.push_back(t);
      if (i < 10) population.push_back({t.genome, t.fitness, t.id, 1.0});
    }
  }
};

}  // namespace

TEST_CASE("breed_child: two tournament winners, their first blended child, mutated",
          "[hpo][operators][surrogate]") {
  Fixture f;
  Rng rng(7), reference(7);
  const Offspring child = breed_child(f.population, f.config, f.mutation, f.space, rng);
  const auto parents =
      select_tournament(fitnesses_of(f.population), 2, 2, Direction::minimize, reference);
  auto expected = mate(f.population[parents[0]], f.population[parents[1]], f.config.crossover_rate,
                       f.config.blend_alpha, f.space, reference)
                      .first;
  expected = maybe_mutate(expected, f.mutation, f.space, reference);
  CHECK(child.genome == expected.genome);
  CHECK(child.step == expected.step);
}

TEST_CASE("breed_screened keeps the child the model scores highest", "[hpo][surrogate]") {
  Fixture f;
  const TpeModel model(f.space, f.trials, Direction::minimize, TpeConfig{});
  REQUIRE_FALSE(model.empty());
  Rng rng(11), reference(11);
  const Offspring chosen =
      breed_screened(f.population, f.config, f.mutation, f.space, model, 6, rng);
  double best = -INFINITY;
  Genome expected;
  for (int i = 0; i < 6; ++i) {
    const Offspring c = breed_child(f.population, f.config, f.mutation, f.space, reference);
    if (model.score(c.genome) > best) {
      best = model.score(c.genome);
      expected = c.genome;
    }
  }
  CHECK(chosen.genome == expected);
  // The model prefers where the good results are: near the best trial rather than far from all.
  const Trial* best_trial = &f.trials[0];
  for (const Trial& t : f.trials)
    if (t.fitness < best_trial->fitness) best_trial = &t;
  CHECK(model.score(best_trial->genome) > model.score(Genome{5.0, -5.0}));
  // No success yet: no model.
  CHECK(TpeModel(f.space, {}, Direction::minimize, TpeConfig{}).empty());
}
