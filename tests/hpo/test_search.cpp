// Searches: the batch protocol, determinism under any completion order, elitism, migration,
// stopping rules, failures, the random and grid baselines, and the GA beating random search.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

#include "hpo/genetic_search.hpp"
#include "hpo/grid_search.hpp"
#include "hpo/objectives.hpp"
#include "hpo/random_search.hpp"
#include "hpo/search.hpp"

using namespace strata;

namespace {

enum class Order { in_order, reversed, shuffled };

using Objective = std::function<double(const Trial&)>;

Objective function(ObjectiveKind kind) {
  return [kind](const Trial& t) { return evaluate_objective(kind, t.genome); };
}

// Plays the scheduler: hands out each batch and reports its results in the given order.
void drive(Search& search, const Objective& f, Order order = Order::in_order,
           std::uint64_t shuffle_seed = 0) {
  Rng rng(shuffle_seed);
  while (!search.done()) {
    auto batch = search.next_batch();
    // Nothing to hand out only when the proposals were all repeats and the search then finished.
    if (batch.empty()) {
      REQUIRE(search.done());
      break;
    }
    if (order == Order::reversed) std::reverse(batch.begin(), batch.end());
    if (order == Order::shuffled) {
      for (std::size_t i = batch.size(); i > 1; --i) std::swap(batch[i - 1], batch[rng.below(i)]);
    }
    for (const auto& t : batch) search.report(t.id, f(t));
  }
}

GeneticConfig ga_config(std::uint64_t seed) {
  GeneticConfig c;
  c.population = 24;
  c.generations = 15;
  c.tournament = 3;
  c.elitism = 1;
  c.demes = 3;
  c.migration_interval = 2;
  c.migrants = 1;
  c.direction = Direction::minimize;
  c.seed = seed;
  return c;
}

// The rates before caching made copies free (every child blended or mutated), for tests that
// count trials per generation: with them no child of these seeds repeats a genome.
void with_every_child_new(GeneticConfig& c) {
  c.crossover_rate = 0.9;
  c.blend_alpha = 0.5;
  c.mutation_probability = 1.0;
  c.step_adaptation = 0.0;
}

SearchSpace mixed_space() {
  SearchSpace s;
  s.params.push_back({"dropout", ParamKind::uniform, 0.0, 0.5, {}});
  s.params.push_back({"lr", ParamKind::log_uniform, 1e-5, 1e-1, {}});
  s.params.push_back({"layers", ParamKind::integer, 1, 6, {}});
  s.params.push_back({"optimizer", ParamKind::choice, 0, 0, {"sgd", "adam", "rmsprop"}});
  return s;
}

// A made-up loss over the mixed space, best at dropout 0.1, lr 1e-3, 3 layers, adam.
double mixed_loss(const Trial& t) {
  const auto& g = t.genome;
  return std::pow(g[0] - 0.1, 2) + std::pow(std::log10(g[1]) + 3.0, 2) + std::abs(g[2] - 3.0) +
         (g[3] == 1.0 ? 0.0 : 1.0);
}

bool same_trials(const std::vector<Trial>& a, const std::vector<Trial>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    if (a[i].id != b[i].id || a[i].generation != b[i].generation || a[i].deme != b[i].deme ||
        a[i].genome != b[i].genome || a[i].failed != b[i].failed)
      return false;
    if (!(a[i].fitness == b[i].fitness || (std::isnan(a[i].fitness) && std::isnan(b[i].fitness))))
      return false;
  }
  return true;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

TEST_CASE("the same seed gives the same search whatever order results arrive in", "[hpo][search]") {
  GeneticSearch reference(mixed_space(), ga_config(42));
  drive(reference, mixed_loss);
  REQUIRE(reference.trials().size() > 100);
  for (const auto& t : reference.trials()) REQUIRE(within(reference.space(), t.genome));

  GeneticSearch again(mixed_space(), ga_config(42));
  drive(again, mixed_loss);
  CHECK(same_trials(reference.trials(), again.trials()));

  GeneticSearch reversed(mixed_space(), ga_config(42));
  drive(reversed, mixed_loss, Order::reversed);
  CHECK(same_trials(reference.trials(), reversed.trials()));

  GeneticSearch shuffled(mixed_space(), ga_config(42));
  drive(shuffled, mixed_loss, Order::shuffled, 99);
  CHECK(same_trials(reference.trials(), shuffled.trials()));
  CHECK(shuffled.history().size() == reference.history().size());
  CHECK(shuffled.best()->id == reference.best()->id);

  GeneticSearch other(mixed_space(), ga_config(43));
  drive(other, mixed_loss);
  CHECK_FALSE(same_trials(reference.trials(), other.trials()));
}

TEST_CASE("the search waits for a whole batch and refuses bad reports", "[hpo][search]") {
  auto c = ga_config(1);
  c.demes = 1;
  with_every_child_new(c);
  GeneticSearch search(mixed_space(), c);
  auto batch = search.next_batch();
  REQUIRE(batch.size() == 24);
  for (std::size_t i = 0; i < batch.size(); ++i) {
    CHECK(batch[i].id == static_cast<int>(i));
    CHECK(batch[i].generation == 0);
  }
  CHECK(search.next_batch().empty());  // nothing more until all 24 are in
  CHECK_FALSE(search.done());
  CHECK_THROWS_AS(search.report(24, 1.0), std::invalid_argument);
  CHECK_THROWS_AS(search.report(-1, 1.0), std::invalid_argument);
  search.report(3, 1.0);
  CHECK_THROWS_WITH(search.report(3, 2.0), Catch::Matchers::Contains("twice"));
  CHECK(search.outstanding() == 23);
  for (const auto& t : batch)
    if (t.id != 3) search.report(t.id, mixed_loss(t));
  CHECK(search.history().size() == 1);
  const auto next = search.next_batch();
  // One elite is kept, not re-evaluated; children that repeat a genome are cached, not handed out.
  REQUIRE(next.size() + search.take_cached().size() == 23);
  REQUIRE_FALSE(next.empty());
  CHECK(next.front().id >= 24);
  CHECK(next.back().id <= 24 + 22);
  CHECK(next.front().generation == 1);
  CHECK_THROWS_AS(search.report(5, 1.0), std::invalid_argument);  // from the finished batch
}

TEST_CASE("elitism never loses the best", "[hpo][search]") {
  auto c = ga_config(7);
  c.demes = 1;
  c.generations = 30;
  c.mutation_sigma = 0.5;  // wild offspring: without elites the best is soon lost
  c.mutation_rate = 1.0;
  GeneticSearch search(mixed_space(), c);
  int previous_best = -1;
  while (!search.done()) {
    for (const auto& t : search.next_batch()) search.report(t.id, mixed_loss(t));
    const auto& deme = search.demes()[0];
    if (previous_best >= 0) {
      const bool kept = std::any_of(deme.begin(), deme.end(), [&](const Individual& i) {
        return i.trial_id == previous_best;
      });
      REQUIRE(kept);
    }
    previous_best = deme[elites(fitnesses_of(deme), 1, c.direction)[0]].trial_id;
  }
  const auto& h = search.history();
  for (std::size_t g = 1; g < h.size(); ++g) REQUIRE(h[g].best <= h[g - 1].best);
  CHECK(h.back().best == search.best()->fitness);

  // The same search without elites does lose its best: the check above can fail.
  c.elitism = 0;
  GeneticSearch no_elites(mixed_space(), c);
  drive(no_elites, mixed_loss);
  const auto& hn = no_elites.history();
  bool lost = false;
  for (std::size_t g = 1; g < hn.size(); ++g) lost = lost || hn[g].best > hn[g - 1].best;
  CHECK(lost);
}

TEST_CASE("migration sends each deme's best around the ring every interval", "[hpo][search]") {
  auto c = ga_config(5);
  c.demes = 3;
  c.population = 12;
  c.migration_interval = 3;
  GeneticSearch search(mixed_space(), c);
  auto foreign = [&](int d) {
    std::set<int> out;
    for (const auto& ind : search.demes()[d])
      if (search.trials()[ind.trial_id].deme != d) out.insert(ind.trial_id);
    return out;
  };
  for (int g = 0; g < 3; ++g) {
    const auto batch = search.next_batch();
    for (const auto& t : batch) search.report(t.id, mixed_loss(t));
    if (g < 2) {
      for (int d = 0; d < 3; ++d) CHECK(foreign(d).empty());
    }
  }
  // After the third generation: deme d+1 holds deme d's best, and nothing else from outside.
  for (int d = 0; d < 3; ++d) {
    const auto received = foreign((d + 1) % 3);
    REQUIRE(received.size() == 1);
    const auto& migrant = search.trials()[*received.begin()];
    CHECK(migrant.deme == d);
    // Nothing left in deme d that is better than the migrant it sent.
    for (const auto& ind : search.demes()[d])
      if (search.trials()[ind.trial_id].deme == d) CHECK_FALSE(ind.fitness < migrant.fitness);
  }
}

TEST_CASE("the genetic search stops on target, patience, budget and generations", "[hpo][search]") {
  const auto space = objective_space("sphere", 3);
  const auto f = function(ObjectiveKind::sphere);

  SECTION("target") {
    auto c = ga_config(3);
    c.generations = 200;
    c.target = 0.5;
    GeneticSearch s(space, c);
    drive(s, f);
    CHECK(s.stop_reason() == "target");
    REQUIRE(s.trainings_to_target());
    // trainings_to_target counts trainings: repeated genomes (cached trials) are not among them.
    const auto hit = std::find_if(s.trials().begin(), s.trials().end(), [&](const Trial& t) {
      return t.training == *s.trainings_to_target() - 1;
    });
    REQUIRE(hit != s.trials().end());
    CHECK(hit->fitness <= 0.5);
    for (int i = 0; i < hit->id; ++i) CHECK(s.trials()[i].fitness > 0.5);
    CHECK(s.best()->fitness <= 0.5);
    CHECK(s.history().size() < 200);
  }
  SECTION("patience") {
    auto c = ga_config(3);
    c.generations = 100;
    c.patience = 4;
    GeneticSearch s(space, c);
    drive(s, [](const Trial&) { return 1.0; });  // a flat landscape never improves
    CHECK(s.stop_reason() == "patience");
    CHECK(s.history().size() == 5);  // the first generation sets the best, 4 more fail to beat it
    CHECK_FALSE(s.trainings_to_target());
  }
  SECTION("max trainings cut the last generation short") {
    auto c = ga_config(3);
    c.demes = 1;
    c.population = 10;
    c.max_trainings = 25;
    with_every_child_new(c);
    GeneticSearch s(space, c);
    drive(s, f);
    CHECK(s.stop_reason() == "max_trainings");
    CHECK(s.trials().size() == 25);
    CHECK(s.trainings() == 25);
    CHECK(s.history().size() == 3);  // 10 + 9 + 6
    CHECK(s.history().back().evaluated == 6);
  }
  SECTION("generations") {
    auto c = ga_config(3);
    c.generations = 4;
    GeneticSearch s(space, c);
    drive(s, f);
    CHECK(s.stop_reason() == "generations");
    CHECK(s.history().size() == 4);
    CHECK(s.trials().size() == 24 + 3 * 21);  // 3 demes of 8 keep one elite each
    CHECK(s.next_batch().empty());
  }
}

TEST_CASE("failed trials are recorded, never best, and the search goes on", "[hpo][search]") {
  auto c = ga_config(11);
  c.direction = Direction::maximize;
  GeneticSearch s(mixed_space(), c);
  // Every third trial diverges; a failure also hides a fitness that would otherwise win.
  int explicit_failures = 0;
  while (!s.done()) {
    for (const auto& t : s.next_batch()) {
      if (t.id % 3 == 0)
        s.report(t.id, std::numeric_limits<double>::quiet_NaN());
      else if (t.id % 3 == 1 && t.id % 2 == 0)
        s.report(t.id, 1e9, true), ++explicit_failures;
      else
        s.report(t.id, -mixed_loss(t));
    }
  }
  CHECK(s.stop_reason() == "generations");
  CHECK(explicit_failures > 0);
  REQUIRE(s.best());
  CHECK_FALSE(s.best()->failed);
  CHECK(s.best()->fitness < 1e9);
  int failed = 0;
  for (const auto& t : s.trials()) {
    failed += t.failed ? 1 : 0;
    // A repeated genome takes its original's result, failure included.
    if (t.cached()) {
      CHECK(t.failed == s.trials()[static_cast<std::size_t>(t.copy_of)].failed);
      continue;
    }
    if (t.id % 3 == 0 || (t.id % 3 == 1 && t.id % 2 == 0)) {
      CHECK(t.failed);
      CHECK(std::isnan(t.fitness));
    }
  }
  int recorded = 0;
  for (const auto& h : s.history()) {
    recorded += h.failed;
    CHECK(std::isfinite(h.mean));
  }
  CHECK(recorded == failed);
}

TEST_CASE("a generation in which everything fails does not stop the search", "[hpo][search]") {
  auto c = ga_config(2);
  c.generations = 3;
  GeneticSearch s(mixed_space(), c);
  drive(s, [](const Trial& t) { return t.generation == 0 ? NAN : mixed_loss(t); });
  CHECK(s.stop_reason() == "generations");
  CHECK(std::isnan(s.history()[0].best));
  CHECK(std::isnan(s.history()[0].mean));
  CHECK(s.history()[0].failed == 24);
  REQUIRE(s.best());
  CHECK(s.best()->generation > 0);
}

TEST_CASE("genetic settings are checked", "[hpo][search]") {
  using Catch::Matchers::Contains;
  auto c = ga_config(1);
  c.elitism = 8;  // demes of 8 would breed nobody
  CHECK_THROWS_WITH(GeneticSearch(mixed_space(), c), Contains("population"));
  c = ga_config(1);
  c.tournament = 0;
  CHECK_THROWS_WITH(GeneticSearch(mixed_space(), c), Contains("tournament = 0"));
  c = ga_config(1);
  c.mutation_rate = 1.5;
  CHECK_THROWS_WITH(GeneticSearch(mixed_space(), c), Contains("mutation_rate = 1.5"));
  c = ga_config(1);
  c.migrants = 9;
  CHECK_THROWS_WITH(GeneticSearch(mixed_space(), c), Contains("migrants = 9"));
  c = ga_config(1);
  SearchSpace bad{{{"lr", ParamKind::log_uniform, 0.0, 1.0, {}}}};
  CHECK_THROWS_WITH(GeneticSearch(bad, c), Contains("'lr'"));
}

TEST_CASE("random search draws n trials in batches of the parallel slots", "[hpo][search]") {
  const auto space = mixed_space();
  RandomSearch s(space, {10, 4, std::nullopt, Direction::minimize, 5});
  std::vector<std::size_t> sizes;
  while (!s.done()) {
    const auto batch = s.next_batch();
    sizes.push_back(batch.size());
    for (const auto& t : batch) s.report(t.id, mixed_loss(t));
  }
  CHECK(sizes == std::vector<std::size_t>{4, 4, 2});
  CHECK(s.stop_reason() == "exhausted");
  CHECK(s.history().size() == 3);
  for (const auto& t : s.trials()) CHECK(within(space, t.genome));

  // Trial i is the same whatever the batch size; another seed gives other trials.
  RandomSearch one_slot(space, {10, 1, std::nullopt, Direction::minimize, 5});
  drive(one_slot, mixed_loss, Order::reversed);
  for (std::size_t i = 0; i < 10; ++i) CHECK(one_slot.trials()[i].genome == s.trials()[i].genome);
  RandomSearch reseeded(space, {10, 4, std::nullopt, Direction::minimize, 6});
  drive(reseeded, mixed_loss);
  CHECK(reseeded.trials()[0].genome != s.trials()[0].genome);

  RandomSearch targeted(objective_space("sphere", 1), {1000, 8, 0.01, Direction::minimize, 5});
  drive(targeted, function(ObjectiveKind::sphere));
  CHECK(targeted.stop_reason() == "target");
  CHECK(targeted.trials().size() < 1000);
  CHECK(targeted.trials()[*targeted.trainings_to_target() - 1].fitness <= 0.01);
}

TEST_CASE("random search hands out its next batch while the last runs, and reads them in order",
          "[hpo][search]") {
  const auto space = mixed_space();
  RandomSearch s(space, {10, 4, std::nullopt, Direction::minimize, 5});
  const auto b1 = s.next_batch(), b2 = s.next_batch(), b3 = s.next_batch();
  CHECK(b1.size() == 4);
  CHECK(b2.size() == 4);
  CHECK(b3.size() == 2);
  CHECK(s.next_batch().empty());  // all 10 handed out
  CHECK(b2.front().generation == 1);
  CHECK(b3.front().generation == 2);
  // The last batch finishes first: nothing is read until the first batch is complete.
  for (const auto& t : b3) s.report(t.id, mixed_loss(t));
  for (const auto& t : b2) s.report(t.id, mixed_loss(t));
  CHECK(s.history().empty());
  CHECK_FALSE(s.done());
  for (auto t = b1.rbegin(); t != b1.rend(); ++t) s.report(t->id, mixed_loss(*t));
  REQUIRE(s.history().size() == 3);
  for (int g = 0; g < 3; ++g) CHECK(s.history()[g].generation == g);
  CHECK(s.history()[0].trainings == 4);
  CHECK(s.history()[1].trainings == 8);
  CHECK(s.history()[2].trainings == 10);
  CHECK(s.done());

  RandomSearch serial(space, {10, 4, std::nullopt, Direction::minimize, 5});
  drive(serial, mixed_loss);
  CHECK(serial.best()->id == s.best()->id);
  for (std::size_t i = 0; i < 3; ++i) CHECK(serial.history()[i].best == s.history()[i].best);

  // With a target it waits for each batch: how many batches would be out when the target is met
  // depends on timing, and the search must not.
  RandomSearch targeted(objective_space("sphere", 1), {100, 2, 1e9, Direction::minimize, 5});
  const auto first = targeted.next_batch();
  CHECK(targeted.next_batch().empty());
  for (const auto& t : first) targeted.report(t.id, sphere(t.genome));
  CHECK(targeted.trainings_to_target() == 1);
  CHECK(targeted.done());
  CHECK(targeted.stop_reason() == "target");
  CHECK(targeted.trainings() == 2);
  CHECK_THROWS_WITH(targeted.report(first[0].id, 1.0), Catch::Matchers::Contains("reported twice"));

  // The genetic search breeds from results, so it waits.
  GeneticSearch ga(space, ga_config(1));
  CHECK_FALSE(ga.next_batch().empty());
  CHECK(ga.next_batch().empty());
}

TEST_CASE("grid search enumerates every point once, last parameter innermost", "[hpo][search]") {
  SearchSpace space;
  space.params.push_back({"u", ParamKind::uniform, 0.0, 1.0, {}});
  space.params.push_back({"l", ParamKind::log_uniform, 1e-3, 1e-1, {}});
  space.params.push_back({"n", ParamKind::integer, 1, 2, {}});
  space.params.push_back({"c", ParamKind::choice, 0, 0, {"a", "b"}});

  const auto axes = grid_axes(space, 3);
  CHECK(axes[0] == std::vector<double>{0.0, 0.5, 1.0});
  REQUIRE(axes[1].size() == 3);
  CHECK(axes[1][0] == 1e-3);
  CHECK(axes[1][1] == Approx(1e-2));
  CHECK(axes[1][2] == 1e-1);
  CHECK(axes[2] == std::vector<double>{1, 2});
  CHECK(axes[3] == std::vector<double>{0, 1});
  CHECK(grid_axes(space, 1)[0] == std::vector<double>{0.5});

  GridSearch grid(space, {3, 5, 0, std::nullopt, Direction::minimize});
  CHECK(grid.grid_size() == 36);
  drive(grid, mixed_loss, Order::shuffled, 3);
  CHECK(grid.stop_reason() == "exhausted");
  const auto& t = grid.trials();
  REQUIRE(t.size() == 36);
  std::set<Genome> distinct;
  for (const auto& x : t) distinct.insert(x.genome);
  CHECK(distinct.size() == 36);
  CHECK(t[0].genome == Genome{0.0, 1e-3, 1, 0});
  CHECK(t[1].genome == Genome{0.0, 1e-3, 1, 1});
  CHECK(t[2].genome == Genome{0.0, 1e-3, 2, 0});
  CHECK(t[35].genome == Genome{1.0, 1e-1, 2, 1});
  CHECK(grid.history().size() == 8);  // batches of 5
  CHECK(grid.best()->genome == Genome{0.0, 1e-3, 2, 1});

  GridSearch capped(space, {3, 5, 7, std::nullopt, Direction::minimize});
  drive(capped, mixed_loss);
  CHECK(capped.trials().size() == 7);
  CHECK(capped.stop_reason() == "max_trainings");

  SearchSpace huge;
  huge.params.push_back({"n", ParamKind::integer, 0, 1e6, {}});
  huge.params.push_back({"m", ParamKind::integer, 0, 1e6, {}});
  CHECK_THROWS_WITH(grid_axes(huge, 3), Catch::Matchers::Contains("more than"));
}

TEST_CASE("the genetic search beats random search on sphere and rastrigin in 10 dimensions",
          "[hpo][search][ga-vs-random]") {
  const int budget = 2000, dims = 10;
  for (auto kind : {ObjectiveKind::sphere, ObjectiveKind::rastrigin}) {
    const auto space = objective_space(kind, dims);
    std::vector<double> ga_best, random_best;
    for (std::uint64_t seed = 1; seed <= 7; ++seed) {
      GeneticConfig c;
      c.population = 40;
      c.generations = 1000;  // the budget decides
      c.max_trainings = budget;
      c.tournament = 3;
      c.elitism = 2;
      c.demes = 2;
      c.migration_interval = 5;
      c.mutation_sigma = 0.1;
      c.mutation_rate = 0.2;
      c.direction = Direction::minimize;
      c.seed = seed;
      GeneticSearch ga(space, c);
      drive(ga, function(kind));
      REQUIRE(ga.trainings() == budget);
      ga_best.push_back(ga.best()->fitness);

      RandomSearch random(space, {budget, 40, std::nullopt, Direction::minimize, seed});
      drive(random, function(kind));
      REQUIRE(random.trainings() == budget);
      random_best.push_back(random.best()->fitness);
    }
    const double ga = median(ga_best), rs = median(random_best);
    WARN(objective_name(kind) << " " << dims << "-d, " << budget
                              << " evaluations, median best of 7 seeds: GA " << ga << ", random "
                              << rs);
    CHECK(ga < rs);
    CHECK(ga < 0.5 * rs);
  }
}

// A small discrete space converges fast: children repeat their parents' genomes. Each repeat takes
// the earlier result: no genome is trained twice, repeats are cached rows that do not count
// against max_trainings, and a search replayed from its journal (cached rows left out) comes out
// the same.
TEST_CASE("a repeated genome is never trained twice", "[hpo][search][cache]") {
  SearchSpace space;
  space.params.push_back({"units", ParamKind::integer, 1, 4, {}});
  space.params.push_back({"opt", ParamKind::choice, 0, 0, {"sgd", "adam"}});
  GeneticConfig c;
  c.population = 8;
  c.generations = 12;
  c.elitism = 1;
  c.direction = Direction::minimize;
  c.seed = 5;
  const Objective f = [](const Trial& t) { return std::abs(t.genome[0] - 3) + t.genome[1]; };
  GeneticSearch search(space, c);
  std::set<Genome> trained;
  int handed_out = 0;
  std::vector<TrialResult> journal;
  while (!search.done()) {
    const auto batch = search.next_batch();
    // The last generation may be all repeats: resolved inside next_batch, which then finishes.
    if (batch.empty()) {
      REQUIRE(search.done());
      break;
    }
    for (const auto& t : batch) {
      const Genome key = clamp(space, t.genome);
      CHECK(trained.insert(key).second);  // never a genome trained before
      CHECK_FALSE(t.cached());
      CHECK(t.training == handed_out++);
      search.report(t.id, f(t));
      journal.push_back({t.id, f(t)});
    }
  }
  CHECK(search.trainings() == static_cast<int>(trained.size()));
  CHECK(search.trials().size() == static_cast<std::size_t>(search.trainings() + search.cached()));
  REQUIRE(search.cached() > 0);
  const auto cached = search.take_cached();
  CHECK(static_cast<int>(cached.size()) == search.cached());
  CHECK(search.take_cached().empty());  // each once
  for (const Trial& copy : cached) {
    const Trial& original = search.trials()[static_cast<std::size_t>(copy.copy_of)];
    CHECK(copy.copy_of < copy.id);
    CHECK(clamp(space, copy.genome) == clamp(space, original.genome));
    CHECK(copy.fitness == original.fitness);
    CHECK(copy.training == -1);
  }
  // A cached trial is no result of its own and never among the top (its original is).
  for (const Trial& t : search.top(100)) CHECK_FALSE(t.cached());
  CHECK_THROWS_AS(search.report(cached.front().id, 0.0), std::invalid_argument);
  // The journal without cached rows replays to the same search.
  GeneticSearch again(space, c);
  again.replay(journal);
  REQUIRE(again.trials().size() == search.trials().size());
  for (std::size_t i = 0; i < search.trials().size(); ++i) {
    CHECK(again.trials()[i].genome == search.trials()[i].genome);
    CHECK(again.trials()[i].copy_of == search.trials()[i].copy_of);
  }
  CHECK(again.cached() == search.cached());

  // The budget counts trainings: repeats proposed before it is spent do not use it up.
  c.generations = 40;
  c.max_trainings = 6;  // of the 8 genomes the space has
  GeneticSearch budgeted(space, c);
  drive(budgeted, f);
  CHECK(budgeted.stop_reason() == "max_trainings");
  CHECK(budgeted.trainings() == c.max_trainings);
  CHECK(budgeted.trials().size() > static_cast<std::size_t>(c.max_trainings));
}

// With neither crossover nor mutation, every child is a copy of a parent: after the first
// generation nothing is new, so (with the cache) nothing more is trained.
TEST_CASE("mutation_probability 0 and crossover_rate 0 breed copies only", "[hpo][search][cache]") {
  const auto space = objective_space("sphere", 3);
  auto c = ga_config(9);
  c.crossover_rate = 0.0;
  c.mutation_probability = 0.0;
  c.generations = 5;
  GeneticSearch s(space, c);
  drive(s, function(ObjectiveKind::sphere));
  CHECK(s.trainings() == c.population);
  CHECK(s.cached() == static_cast<int>(s.trials().size()) - c.population);
  // And a decay is checked like the other settings.
  auto bad = ga_config(9);
  bad.mutation_decay = 0.0;
  CHECK_THROWS_WITH(GeneticSearch(space, bad), Catch::Matchers::Contains("mutation_decay"));
  bad = ga_config(9);
  bad.mutation_probability = 1.5;
  CHECK_THROWS_WITH(GeneticSearch(space, bad), Catch::Matchers::Contains("mutation_probability"));
}
