// Population-based training's decisions on hand-made scores with a seeded RNG: who copies whom,
// how a copy's values move, the population's rounds, its state and its journal.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <vector>

#include "core/errors.hpp"
#include "hpo/pbt.hpp"
#include "hpo/pbt_log.hpp"
#include "tests/core/temp_dir.hpp"

using namespace strata;

namespace {

const double nan_ = std::nan("");

SearchSpace mixed_space() {
  return SearchSpace{{ParamSpec("lr", ParamKind::log_uniform, 1e-4, 1.0),
                      ParamSpec("momentum", ParamKind::uniform, 0.0, 1.0),
                      ParamSpec("units", ParamKind::integer, 1, 10),
                      ParamSpec("opt", ParamKind::choice, 0, 0, {"sgd", "adam", "rmsprop"})}};
}

}  // namespace

TEST_CASE("the worst quantile copies one of the best, drawn uniformly", "[hpo][pbt]") {
  const std::vector<double> scores{0.5, 0.9, 0.1, 0.7, 0.3, 0.8, 0.2, 0.6};
  Rng rng(42), replay(42);
  const auto exploits = pbt_exploits(scores, 0.25, Direction::maximize, rng);
  // ceil(0.25 x 8) = 2: members 2 (0.1) and 6 (0.2) copy member 1 (0.9) or 5 (0.8).
  const int best[] = {1, 5};
  REQUIRE(exploits.size() == 2);
  CHECK(exploits[0] == PbtExploit{2, best[replay.below(2)]});
  CHECK(exploits[1] == PbtExploit{6, best[replay.below(2)]});
  CHECK(rng.counter() == replay.counter());

  // Minimizing, the largest copy the smallest.
  Rng rng2(7), replay2(7);
  const auto down = pbt_exploits(scores, 0.25, Direction::minimize, rng2);
  const int smallest[] = {2, 6};
  REQUIRE(down.size() == 2);
  CHECK(down[0] == PbtExploit{1, smallest[replay2.below(2)]});
  CHECK(down[1] == PbtExploit{5, smallest[replay2.below(2)]});
}

TEST_CASE("diverged members always copy, and ties rank by member", "[hpo][pbt]") {
  Rng rng(3);
  // Two NaN among six: the quantile's two copiers are the diverged ones; sources 2 and 4.
  const auto some = pbt_exploits(std::vector<double>{0.5, nan_, 0.9, nan_, 0.7, 0.6}, 0.25,
                                 Direction::maximize, rng);
  REQUIRE(some.size() == 2);
  CHECK(some[0].target == 1);
  CHECK(some[1].target == 3);
  for (const auto& e : some) CHECK((e.source == 2 || e.source == 4));
  // More diverged than the quantile: every one copies the single member with a score.
  const auto many =
      pbt_exploits(std::vector<double>{nan_, nan_, nan_, 0.4}, 0.25, Direction::maximize, rng);
  CHECK(many == std::vector<PbtExploit>{{0, 3}, {1, 3}, {2, 3}});
  // Equal scores: the last member copies the first.
  CHECK(pbt_exploits(std::vector<double>{0.5, 0.5, 0.5, 0.5}, 0.25, Direction::maximize, rng) ==
        std::vector<PbtExploit>{{3, 0}});
  // Two members: the worse copies the better whatever the quantile.
  CHECK(pbt_exploits(std::vector<double>{0.2, 0.3}, 0.01, Direction::maximize, rng) ==
        std::vector<PbtExploit>{{0, 1}});
  CHECK_THROWS_AS(pbt_exploits(std::vector<double>{nan_, nan_}, 0.25, Direction::maximize, rng),
                  std::invalid_argument);
}

TEST_CASE("explore moves reals by 0.8 or 1.2, integers and choices a step, within bounds",
          "[hpo][pbt]") {
  const SearchSpace space = mixed_space();
  for (std::uint64_t seed = 1; seed <= 20; ++seed) {
    const Genome genome{0.01, 0.9, 1.0, 0.0};
    Rng rng(seed), replay(seed);
    const Genome moved = pbt_explore(space, genome, 0.0, rng);
    // The same draws by hand: resample?, up?, a fresh value, per gene.
    std::vector<bool> up;
    for (const auto& p : space.params) {
      CHECK(replay.uniform_double() >= 0.0);
      up.push_back(replay.uniform_double() < 0.5);
      sample_value(p, replay);
    }
    INFO("seed " << seed);
    CHECK(moved[0] == Approx(up[0] ? 0.012 : 0.008));
    CHECK(moved[1] == (up[1] ? 1.0 : 0.9 * 0.8));  // 1.08 is clamped to the bound
    CHECK(moved[2] == (up[2] ? 2.0 : 1.0));        // round(1.2) = 1 moves a step; 0.8 clamps
    CHECK(moved[3] == (up[3] ? 1.0 : 0.0));        // the neighbour, or the first choice kept
    CHECK(within(space, moved));
  }
  // Resampling every gene: exactly the fresh draws.
  Rng rng(5), replay(5);
  const Genome fresh = pbt_explore(space, Genome{0.01, 0.5, 5.0, 1.0}, 1.0, rng);
  for (std::size_t k = 0; k < space.params.size(); ++k) {
    replay.uniform_double();
    replay.uniform_double();
    CHECK(fresh[k] == sample_value(space.params[k], replay));
  }
}

TEST_CASE("a round's copies take their source's values, explored, and it as parent", "[hpo][pbt]") {
  PbtConfig config;
  config.population = 4;
  config.seed = 9;
  config.rounds = 2;
  PbtPopulation population(mixed_space(), config);
  REQUIRE(population.round() == 1);
  const auto first = population.genomes();
  CHECK(first[0] != first[1]);
  CHECK(population.parents() == std::vector<int>{-1, -1, -1, -1});
  const PbtRound& ended = population.end_round(std::vector<double>{0.3, 0.9, 0.5, 0.1});
  REQUIRE(ended.exploits == std::vector<PbtExploit>{{3, 1}});
  CHECK(ended.genomes == first);
  CHECK(population.parents() == std::vector<int>{0, 1, 2, 1});
  for (int m : {0, 1, 2}) CHECK(population.genomes()[m] == first[m]);
  CHECK(population.genomes()[3] != first[3]);
  CHECK(within(population.space(), population.genomes()[3]));
  CHECK(population.best_member() == 1);
  // Round 2 is the last: nobody copies after it.
  CHECK(population.end_round(std::vector<double>{0.3, 0.9, 0.5, 0.95}).exploits.empty());
  CHECK(population.best_member() == 3);
  // Member 3 trained round 1 as itself, round 2 from member 1's state.
  CHECK(population.lineage(3) == std::vector<std::pair<int, int>>{{1, 1}, {2, 3}});
  CHECK(population.lineage(0) == std::vector<std::pair<int, int>>{{1, 0}, {2, 0}});
  CHECK_THROWS_AS(population.end_round(std::vector<double>{0.1}), std::invalid_argument);
}

TEST_CASE("a population restored from its state equals the one saved", "[hpo][pbt][state]") {
  PbtConfig config;
  config.population = 6;
  config.seed = 21;
  PbtPopulation saved(mixed_space(), config);
  saved.end_round(std::vector<double>{0.1, 0.5, 0.3, nan_, 0.9, 0.2});
  saved.end_round(std::vector<double>{0.6, 0.5, 0.7, 0.4, 0.9, 0.8});
  saved.end_round(std::vector<double>{0.2, 0.3, 0.9, 0.1, 0.5, 0.4});
  StateDict state;
  saved.save_state(state, "pbt");
  PbtPopulation loaded(mixed_space(), config);
  REQUIRE(loaded.round() != saved.round());
  REQUIRE(loaded.genomes() != saved.genomes());
  loaded.load_state(state, "pbt");
  CHECK(loaded.round() == 4);
  CHECK(loaded.genomes() == saved.genomes());
  CHECK(loaded.parents() == saved.parents());
  REQUIRE(loaded.history().size() == saved.history().size());
  for (std::size_t r = 0; r < saved.history().size(); ++r) {
    const PbtRound &a = saved.history()[r], &b = loaded.history()[r];
    CHECK(a.round == b.round);
    CHECK(a.genomes == b.genomes);
    CHECK(a.parents == b.parents);
    CHECK(a.exploits == b.exploits);
    for (std::size_t m = 0; m < a.scores.size(); ++m)
      CHECK((a.scores[m] == b.scores[m] || (std::isnan(a.scores[m]) && std::isnan(b.scores[m]))));
  }
  PbtConfig other = config;
  other.population = 5;
  PbtPopulation smaller(mixed_space(), other);
  CHECK_THROWS_AS(smaller.load_state(state, "pbt"), DataError);
}

TEST_CASE("the pbt journal keeps whole rounds and refuses another search's", "[hpo][pbt][state]") {
  const strata::testing::TempDir temp;
  const std::filesystem::path dir = temp.str();
  const SearchSpace space = mixed_space();
  PbtConfig config;
  config.population = 3;
  config.seed = 4;
  PbtPopulation population(space, config);
  const std::vector<std::vector<double>> scores{{0.2, 0.6, 0.4}, {0.7, nan_, 0.5}};
  {
    PbtLog log(dir, space, 3, false);
    for (const auto& s : scores) {
      const PbtRound& r = population.end_round(s);
      std::vector<PbtMemberResult> results;
      for (double f : s) results.push_back({f, f, f, r.round});
      log.append(population, r, results);
    }
  }
  // A third round cut short after one row and half a line.
  {
    std::ifstream in(dir / "pbt.jsonl");
    std::string first;
    std::getline(in, first);
    std::ofstream out(dir / "pbt.jsonl", std::ios::app);
    out << first.replace(first.find("\"round\":1"), 9, "\"round\":3") << "\n{\"round\":3,\"mem";
  }
  PbtLog resumed(dir, space, 3, true);
  REQUIRE(resumed.recovered().size() == 2);
  CHECK(resumed.recovered()[0] == scores[0]);
  CHECK(std::isnan(resumed.recovered()[1][1]));
  PbtPopulation replayed(space, config);
  for (const auto& s : resumed.recovered()) replayed.end_round(s);
  CHECK_NOTHROW(resumed.check_replay(replayed));
  CHECK(replayed.genomes() == population.genomes());
  // The journal has 2 rounds of 3 rows: the cut round is gone from both files.
  std::ifstream csv(dir / "pbt.csv");
  int lines = 0;
  for (std::string line; std::getline(csv, line);) ++lines;
  CHECK(lines == 1 + 6);
  PbtConfig other_seed = config;
  other_seed.seed = 5;
  PbtPopulation other(space, other_seed);
  for (const auto& s : resumed.recovered()) other.end_round(s);
  CHECK_THROWS_AS(PbtLog(dir, space, 3, true).check_replay(other), DataError);
}
