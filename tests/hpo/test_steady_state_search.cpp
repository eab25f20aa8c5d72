// The asynchronous (steady-state) genetic search: it keeps `slots` trainings in flight and refills
// a slot as each result is reported; its population is the best `population` results so far; what
// it proposes depends on the order of the results, and a replay of that order rebuilds it exactly.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "core/errors.hpp"
#include "core/rng.hpp"
#include "hpo/genetic_search.hpp"
#include "hpo/objectives.hpp"
#include "hpo/steady_state_search.hpp"
#include "tests/hpo/out_of_order.hpp"

using namespace strata;
using Catch::Matchers::Contains;

namespace {

GeneticConfig steady(int slots, std::uint64_t seed = 3) {
  GeneticConfig c;
  c.population = 10;
  c.generations = 8;
  c.elitism = 1;
  c.schedule = GeneticSchedule::asynchronous;
  c.slots = slots;
  c.direction = Direction::minimize;
  c.seed = seed;
  return c;
}

double fitness_of(const Trial& t) {
  if (t.id % 13 == 4) return std::nan("");  // some trainings fail
  return evaluate_objective(ObjectiveKind::rastrigin, t.genome);
}

std::vector<TrialResult> drive(Search& search, std::uint64_t order_seed, int results = 0) {
  return testing::drive_out_of_order(search, order_seed, fitness_of, results);
}

void require_same(const SteadyStateSearch& a, const SteadyStateSearch& b) {
  REQUIRE(a.trials().size() == b.trials().size());
  for (std::size_t i = 0; i < a.trials().size(); ++i) {
    INFO("trial " << i);
    CHECK(a.trials()[i].genome == b.trials()[i].genome);
    CHECK(a.trials()[i].generation == b.trials()[i].generation);
    CHECK(a.trials()[i].step == b.trials()[i].step);
    CHECK(a.trials()[i].copy_of == b.trials()[i].copy_of);
    CHECK(a.trials()[i].reported == b.trials()[i].reported);
  }
  REQUIRE(a.population().size() == b.population().size());
  for (std::size_t i = 0; i < a.population().size(); ++i)
    CHECK(a.population()[i].trial_id == b.population()[i].trial_id);
  REQUIRE(a.history().size() == b.history().size());
  for (std::size_t g = 0; g < a.history().size(); ++g) {
    CHECK(a.history()[g].best == b.history()[g].best);
    CHECK(a.history()[g].trainings == b.history()[g].trainings);
  }
  CHECK(a.outstanding() == b.outstanding());
  CHECK(a.best()->id == b.best()->id);
  CHECK(a.stop_reason() == b.stop_reason());
}

}  // namespace

TEST_CASE("the steady state keeps its slots busy and refills one per result",
          "[hpo][search][asynchronous]") {
  const SearchSpace space = objective_space("rastrigin", 4);
  SteadyStateSearch search(space, steady(3));
  const auto first = search.next_batch();
  CHECK(first.size() == 3);
  CHECK(search.next_batch().empty());  // no more until a result frees a slot
  search.report(first[1].id, fitness_of(first[1]));
  const auto refill = search.next_batch();
  REQUIRE(refill.size() == 1);
  CHECK(refill[0].id == 3);
  CHECK(search.outstanding() == 3);
  // Nothing waits for trials 0 and 2: two more results, two more trials.
  search.report(first[2].id, fitness_of(first[2]));
  search.report(refill[0].id, fitness_of(refill[0]));
  CHECK(search.next_batch().size() == 2);
  CHECK(search.outstanding() == 3);
}

TEST_CASE("the steady state spends the generational budget and keeps the best results",
          "[hpo][search][asynchronous]") {
  const SearchSpace space = objective_space("rastrigin", 4);
  const GeneticConfig config = steady(4);
  SteadyStateSearch search(space, config);
  const auto read = drive(search, 17);
  CHECK(search.stop_reason() == "generations");
  // As many trials as the generational schedule: 10 + 7 x 9.
  CHECK(genetic_proposals(config) == 73);
  CHECK(static_cast<int>(search.trials().size()) == 73);
  CHECK(search.trainings() + search.cached() == 73);
  // The population is the 10 best successful results so far (replace the worst).
  std::vector<TrialResult> ok;
  for (const auto& r : read)
    if (!std::isnan(r.fitness)) ok.push_back(r);
  std::stable_sort(ok.begin(), ok.end(), [](const TrialResult& a, const TrialResult& b) {
    return a.fitness < b.fitness || (a.fitness == b.fitness && a.trial_id > b.trial_id);
  });
  std::set<int> best10, population;
  for (std::size_t i = 0; i < 10; ++i) best10.insert(ok[i].trial_id);
  for (const auto& ind : search.population()) population.insert(ind.trial_id);
  CHECK(population == best10);
  // The first `population` trials are random samples, the rest children of the population: the
  // search improves on its random start.
  double best_random = std::numeric_limits<double>::infinity();
  for (const auto& r : read)
    if (r.trial_id < 10 && !std::isnan(r.fitness)) best_random = std::min(best_random, r.fitness);
  CHECK(search.best()->fitness < best_random);
  CHECK(search.best()->id >= 10);
  // A history line every `population` results, the last one partial.
  // Copies of a parent are cached, not trained: fewer results than trials.
  REQUIRE(search.cached() > 0);
  REQUIRE(search.history().size() == static_cast<std::size_t>((search.trainings() + 9) / 10));
  CHECK(search.history()[0].trainings == 10);
  CHECK(search.history().back().trainings == search.trainings());
  // A trial's generation is the history lines before it was bred.
  for (std::size_t i = 0; i < search.trials().size(); ++i) {
    const Trial& t = search.trials()[i];
    if (t.id < 10) CHECK(t.generation == 0);
    if (i > 0) CHECK(t.generation >= search.trials()[i - 1].generation);
    CHECK(t.generation < static_cast<int>(search.history().size()));
  }
}

TEST_CASE("the steady state depends on the order of results, and a replay of it rebuilds it",
          "[hpo][search][asynchronous][state]") {
  const SearchSpace space = objective_space("rastrigin", 4);
  SteadyStateSearch a(space, steady(4)), b(space, steady(4));
  const auto order_a = drive(a, 21);
  const auto order_b = drive(b, 22);
  // Another completion order breeds other children from trial 10 on (the first 10 are random).
  int differ = 0;
  for (std::size_t i = 0; i < std::min(a.trials().size(), b.trials().size()); ++i) {
    if (i < 10) CHECK(a.trials()[i].genome == b.trials()[i].genome);
    differ += a.trials()[i].genome != b.trials()[i].genome ? 1 : 0;
  }
  CHECK(differ > 30);

  SteadyStateSearch again(space, steady(4));
  again.replay(order_a);
  require_same(a, again);

  // A search saved mid-run and restored goes on as the uninterrupted one.
  SteadyStateSearch first_half(space, steady(4));
  const auto head = drive(first_half, 21, 37);
  REQUIRE(first_half.outstanding() == 4);
  StateDict state;
  first_half.save_state(state, "search");
  SteadyStateSearch restored(space, steady(4));
  REQUIRE(restored.trials().size() != first_half.trials().size());
  restored.load_state(state, "search");
  require_same(first_half, restored);
  CHECK(restored.unfinished().size() == 4);
  CHECK(restored.next_batch().empty());  // its trials in flight are the unfinished ones
  // Both finish by the same order of results.
  const std::vector<TrialResult> tail(order_a.begin() + 37, order_a.end());
  for (SteadyStateSearch* s : {&first_half, &restored})
    for (const auto& r : tail) {
      s->next_batch();
      s->report(r.trial_id, r.fitness, std::isnan(r.fitness));
    }
  require_same(first_half, restored);
  CHECK(restored.done());

  // The order is the journal: the same results in another order are another search's.
  auto swapped = order_a;
  std::swap(swapped[12], swapped[30]);
  SteadyStateSearch other(space, steady(4));
  CHECK_THROWS_AS(other.replay(swapped), DataError);
}

TEST_CASE("the steady state never trains a repeated genome, and a repeat takes no slot",
          "[hpo][search][asynchronous][cache]") {
  // 3 x 3 genomes: repeats are certain.
  SearchSpace space;
  space.params.push_back(ParamSpec{"a", ParamKind::integer, 0.0, 2.0, {}});
  space.params.push_back(ParamSpec{"b", ParamKind::choice, 0.0, 0.0, {"x", "y", "z"}});
  GeneticConfig c = steady(2);
  c.population = 4;
  c.generations = 10;
  c.direction = Direction::maximize;
  SteadyStateSearch search(space, c);
  std::set<Genome> trained;
  while (!search.done()) {
    const auto batch = search.next_batch();
    if (batch.empty()) break;
    for (const Trial& t : batch) {
      CHECK(trained.insert(clamp(space, t.genome)).second);
      search.report(t.id, t.genome[0] + t.genome[1]);
      CHECK(search.outstanding() <= 2);
    }
  }
  CHECK(search.done());
  CHECK(search.cached() > 0);
  CHECK(search.trainings() == static_cast<int>(trained.size()));
  CHECK(search.trainings() <= 9);
}

TEST_CASE("the steady state stops on a target and on max_trainings",
          "[hpo][search][asynchronous]") {
  const SearchSpace space = objective_space("sphere", 2);
  GeneticConfig c = steady(3);
  c.generations = 200;
  c.target = 0.05;
  SteadyStateSearch targeted(space, c);
  const auto read = drive(targeted, 5);
  CHECK(targeted.stop_reason() == "target");
  REQUIRE(targeted.trainings_to_target());
  CHECK(targeted.best()->fitness <= 0.05);
  // The trainings it took are those read up to the first that met it; only the other two in
  // flight then are read after it.
  const auto met = std::find_if(read.begin(), read.end(),
                                [](const TrialResult& r) { return r.fitness <= 0.05; });
  CHECK(*targeted.trainings_to_target() == met - read.begin() + 1);
  CHECK(read.end() - met - 1 <= 2);

  c.target.reset();
  c.max_trainings = 25;
  SteadyStateSearch budgeted(space, c);
  drive(budgeted, 5);
  CHECK(budgeted.stop_reason() == "max_trainings");
  CHECK(budgeted.trainings() == 25);
}

TEST_CASE("the asynchronous schedule refuses demes", "[hpo][search][asynchronous]") {
  GeneticConfig c = steady(2);
  c.demes = 2;
  CHECK_THROWS_WITH(SteadyStateSearch(objective_space("sphere", 2), c), Contains("demes"));
  c.demes = 1;
  c.slots = 0;
  CHECK_THROWS_WITH(SteadyStateSearch(objective_space("sphere", 2), c), Contains("slots"));
}
