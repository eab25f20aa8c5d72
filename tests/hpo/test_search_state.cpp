// A search's state is its journal of results: saved and replayed into a default search of the
// same config it gives back every field (population, demes, history, stall count, best, the trials
// still out), and the search goes on exactly as the uninterrupted one; the trial log is that
// journal on disk and survives a kill mid-line.
#include <catch2/catch.hpp>

#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "core/errors.hpp"
#include "hpo/genetic_search.hpp"
#include "hpo/grid_search.hpp"
#include "hpo/objectives.hpp"
#include "hpo/random_search.hpp"
#include "hpo/search.hpp"
#include "hpo/trial_log.hpp"
#include "tests/core/temp_dir.hpp"

using namespace strata;
using Catch::Matchers::Contains;

namespace {

GeneticConfig ga(std::uint64_t seed) {
  GeneticConfig c;
  c.population = 12;
  c.generations = 8;
  c.elitism = 1;
  c.demes = 2;
  c.migration_interval = 2;
  c.patience = 5;
  c.direction = Direction::minimize;
  c.seed = seed;
  return c;
}

double f(const Trial& t) {
  // Some failures too: a NaN fitness is a failed trial.
  if (t.id % 11 == 5) return std::nan("");
  return evaluate_objective(ObjectiveKind::rastrigin, t.genome);
}

// Runs `search` until `results` trials are reported, leaving the rest of the last batch out.
void run_until(Search& search, int results) {
  int reported = 0;
  while (!search.done() && reported < results) {
    for (const Trial& t : search.next_batch()) {
      if (reported == results) break;
      search.report(t.id, f(t), std::isnan(f(t)));
      ++reported;
    }
  }
}

void require_same(const GeneticSearch& a, const GeneticSearch& b) {
  REQUIRE(a.trials().size() == b.trials().size());
  for (std::size_t i = 0; i < a.trials().size(); ++i) {
    INFO("trial " << i);
    CHECK(a.trials()[i].genome == b.trials()[i].genome);
    CHECK(a.trials()[i].generation == b.trials()[i].generation);
    CHECK(a.trials()[i].deme == b.trials()[i].deme);
    CHECK(a.trials()[i].reported == b.trials()[i].reported);
    CHECK(a.trials()[i].failed == b.trials()[i].failed);
    if (a.trials()[i].reported && !a.trials()[i].failed)
      CHECK(a.trials()[i].fitness == b.trials()[i].fitness);
  }
  CHECK(a.generation() == b.generation());
  REQUIRE(a.demes().size() == b.demes().size());
  for (std::size_t d = 0; d < a.demes().size(); ++d) {
    REQUIRE(a.demes()[d].size() == b.demes()[d].size());
    for (std::size_t i = 0; i < a.demes()[d].size(); ++i) {
      CHECK(a.demes()[d][i].genome == b.demes()[d][i].genome);
      CHECK(a.demes()[d][i].trial_id == b.demes()[d][i].trial_id);
    }
  }
  REQUIRE(a.history().size() == b.history().size());
  for (std::size_t g = 0; g < a.history().size(); ++g) {
    CHECK(a.history()[g].best == b.history()[g].best);
    CHECK(a.history()[g].trainings == b.history()[g].trainings);
  }
  CHECK(a.trainings() == b.trainings());
  CHECK(a.outstanding() == b.outstanding());
  CHECK(a.best().has_value() == b.best().has_value());
  if (a.best()) CHECK(a.best()->id == b.best()->id);
  CHECK(a.stop_reason() == b.stop_reason());
}

}  // namespace

TEST_CASE("a genetic search restored from its state continues as the uninterrupted one",
          "[hpo][search][state]") {
  const SearchSpace space = objective_space("rastrigin", 4);
  GeneticSearch original(space, ga(9));
  run_until(original, 41);  // mid-generation: part of a batch is still out
  REQUIRE(original.outstanding() > 0);
  StateDict state;
  original.save_state(state, "search");

  GeneticSearch restored(space, ga(9));
  REQUIRE(restored.trials().size() != original.trials().size());
  restored.load_state(state, "search");
  require_same(original, restored);
  const auto pending = restored.unfinished();
  REQUIRE(static_cast<int>(pending.size()) == original.outstanding());

  // Both finish: report the pending trials, then drive to the end in the same way.
  for (GeneticSearch* s : {&original, &restored}) {
    for (const Trial& t : s->unfinished()) s->report(t.id, f(t), std::isnan(f(t)));
    while (!s->done())
      for (const Trial& t : s->next_batch()) s->report(t.id, f(t), std::isnan(f(t)));
  }
  require_same(original, restored);
}

TEST_CASE("random and grid searches restore their position", "[hpo][search][state]") {
  const SearchSpace space = objective_space("sphere", 3);
  RandomSearch a(space, RandomConfig{30, 4, std::nullopt, Direction::minimize, 3});
  run_until(a, 13);
  StateDict state;
  a.save_state(state, "s");
  RandomSearch b(space, RandomConfig{30, 4, std::nullopt, Direction::minimize, 3});
  b.load_state(state, "s");
  CHECK(b.trainings() == 13);
  REQUIRE(b.best().has_value());
  CHECK(b.best()->id == a.best()->id);
  // The trials not yet reported are handed out again, with the genomes a gave them.
  for (const Trial& t : b.unfinished())
    if (t.id < static_cast<int>(a.trials().size()))
      CHECK(t.genome == a.trials()[static_cast<std::size_t>(t.id)].genome);

  GridSearch g(space, GridConfig{3, 2, 0, std::nullopt, Direction::minimize});
  run_until(g, 7);
  StateDict grid_state;
  g.save_state(grid_state, "g");
  GridSearch h(space, GridConfig{3, 2, 0, std::nullopt, Direction::minimize});
  h.load_state(grid_state, "g");
  CHECK(h.trainings() == 7);
}

TEST_CASE("a journal of another search is refused", "[hpo][search][state]") {
  const SearchSpace space = objective_space("rastrigin", 4);
  GeneticSearch original(space, ga(9));
  run_until(original, 30);
  StateDict state;
  original.save_state(state, "search");
  GeneticConfig smaller = ga(9);
  smaller.population = 6;
  smaller.generations = 2;
  GeneticSearch other(space, smaller);
  CHECK_THROWS_WITH(other.load_state(state, "search"), Contains("written by another search"));
}

TEST_CASE("the trial log resumes from its complete rows", "[hpo][trial_log][state]") {
  testing::TempDir dir;
  const SearchSpace space = objective_space("sphere", 2);
  RandomSearch search(space, RandomConfig{5, 5, std::nullopt, Direction::minimize, 4});
  const auto batch = search.next_batch();
  {
    TrialLog log(dir.str(), search.space());
    for (const Trial& t : batch) {
      TrialOutcome o;
      o.fitness = t.id == 2 ? 0.0 : 1.5 + t.id;
      o.status = t.id == 2 ? TrialStatus::failed : TrialStatus::ok;
      o.reason = t.id == 2 ? "diverged" : "";
      log.append(t, o);
    }
  }
  // A kill in the middle of the last row.
  {
    std::ofstream jsonl(dir.file("trials.jsonl"), std::ios::app);
    jsonl << R"({"trial": 5, "generation": 1, "dem)";
  }
  TrialLog resumed(dir.str(), search.space(), true);
  const auto& r = resumed.recovered();
  REQUIRE(r.size() == 5);
  // In the order the rows were written.
  for (int i = 0; i < 5; ++i) CHECK(r[static_cast<std::size_t>(i)].trial_id == i);
  CHECK(r[0].fitness == 1.5);
  CHECK(r[4].fitness == 5.5);
  CHECK(std::isnan(r[2].fitness));
  // trials.csv is rewritten from the same rows: a header and five rows.
  std::ifstream csv(dir.file("trials.csv"));
  int lines = 0;
  for (std::string line; std::getline(csv, line);) ++lines;
  CHECK(lines == 6);
}

TEST_CASE("top gives the k best successful trials, the earliest first among equals",
          "[hpo][search]") {
  const SearchSpace space = objective_space("sphere", 2);
  RandomSearch search(space, RandomConfig{6, 6, std::nullopt, Direction::minimize, 1});
  const auto batch = search.next_batch();
  const double fitness[] = {3.0, 1.0, std::nan(""), 1.0, 0.5, 9.0};
  for (const Trial& t : batch) search.report(t.id, fitness[t.id], std::isnan(fitness[t.id]));
  std::vector<int> ids;
  for (const Trial& t : search.top(4)) ids.push_back(t.id);
  CHECK(ids == std::vector<int>{4, 1, 3, 0});
  CHECK(search.top(0).empty());
  CHECK(search.top(100).size() == 5);  // the failed trial never ranks
}

TEST_CASE("a replay that makes other trials than the journal's rows is refused",
          "[hpo][trial_log][state]") {
  testing::TempDir dir;
  const SearchSpace space = objective_space("sphere", 2);
  const RandomConfig config{4, 4, std::nullopt, Direction::minimize, 4};
  {
    RandomSearch search(space, config);
    TrialLog log(dir.str(), search.space());
    for (const Trial& t : search.next_batch()) {
      TrialOutcome o;
      o.fitness = sphere(t.genome);
      search.report(t.id, o.fitness);
      log.append(search.trials()[static_cast<std::size_t>(t.id)], o);
    }
  }
  TrialLog resumed(dir.str(), space, true);
  RandomSearch same(space, config);
  same.replay(resumed.recovered());
  CHECK_NOTHROW(resumed.check_replay(same));
  // Another seed accepts the same trial ids, but proposes other genomes for them.
  RandomSearch other(space, RandomConfig{4, 4, std::nullopt, Direction::minimize, 5});
  other.replay(resumed.recovered());
  CHECK_THROWS_WITH(resumed.check_replay(other), Contains("trials.jsonl: trial 0 was run with") &&
                                                     Contains("written by another search"));
}

TEST_CASE("max_epochs stops the search, and the epochs are in its journal",
          "[hpo][search][state]") {
  const SearchSpace space = objective_space("sphere", 2);
  RandomConfig config{40, 4, std::nullopt, Direction::minimize, 6};
  config.max_epochs = 20;
  RandomSearch search(space, config);
  // Trial i trains 1 + i % 3 epochs (a pruned one stops early).
  std::vector<TrialResult> journal;
  while (!search.done())
    for (const Trial& t : search.next_batch()) {
      const int epochs = 1 + t.id % 3;
      search.report(t.id, sphere(t.genome), false, epochs);
      journal.push_back({t.id, sphere(t.genome), epochs});
    }
  CHECK(search.stop_reason() == "max_epochs");
  CHECK(search.epochs() >= 20);
  // No batch was handed out once 20 epochs were spent: the last one began below it.
  REQUIRE(search.trainings() % 4 == 0);
  long long before_last = 0;
  for (std::size_t i = 0; i + 4 < journal.size(); ++i) before_last += journal[i].epochs;
  CHECK(before_last < 20);
  CHECK(search.trainings() < 40);
  StateDict state;
  search.save_state(state, "s");
  CHECK(Search::results_of(state, "s") == journal);
  RandomSearch restored(space, config);
  restored.load_state(state, "s");
  CHECK(restored.epochs() == search.epochs());
  CHECK(restored.stop_reason() == "max_epochs");
  CHECK(restored.done());
}
