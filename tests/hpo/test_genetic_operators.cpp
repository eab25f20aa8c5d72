// Genetic operators: selection pressure, bounds and types of offspring, elites and ring migration.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <vector>

#include "hpo/genetic_operators.hpp"

using namespace strata;

namespace {

SearchSpace mixed_space() {
  SearchSpace s;
  s.params.push_back({"dropout", ParamKind::uniform, 0.0, 0.5, {}});
  s.params.push_back({"lr", ParamKind::log_uniform, 1e-5, 1e-1, {}});
  s.params.push_back({"layers", ParamKind::integer, 1, 6, {}});
  s.params.push_back({"optimizer", ParamKind::choice, 0, 0, {"sgd", "adam", "rmsprop", "nadam"}});
  return s;
}

bool is_real(const ParamSpec& p) {
  return p.kind == ParamKind::uniform || p.kind == ParamKind::log_uniform;
}

}  // namespace

TEST_CASE("better treats NaN as the worst in both directions", "[hpo][operators]") {
  CHECK(better(2.0, 1.0, Direction::maximize));
  CHECK(better(1.0, 2.0, Direction::minimize));
  CHECK_FALSE(better(1.0, 1.0, Direction::minimize));
  for (auto d : {Direction::maximize, Direction::minimize}) {
    CHECK(better(-1e300, NAN, d));
    CHECK(better(1e300, NAN, d));
    CHECK_FALSE(better(NAN, 0.0, d));
    CHECK_FALSE(better(NAN, NAN, d));
  }
}

TEST_CASE("tournament selection wins with the probability of the best of k draws",
          "[hpo][operators]") {
  const std::vector<double> fitness{0, 1, 2, 3, 4, 5, 6, 7, 8, 9};
  const int n = 10, draws = 100000;
  for (auto [k, direction] : {std::pair{3, Direction::maximize}, std::pair{3, Direction::minimize},
                              std::pair{1, Direction::maximize}}) {
    Rng rng(5);
    const auto chosen = select_tournament(fitness, k, draws, direction, rng);
    REQUIRE(chosen.size() == static_cast<std::size_t>(draws));
    std::vector<int> count(n, 0);
    for (auto i : chosen) {
      REQUIRE(i < static_cast<std::size_t>(n));
      ++count[i];
    }
    for (int i = 0; i < n; ++i) {
      // rank 0 is the best: index 9 when maximizing, index 0 when minimizing.
      const int r = direction == Direction::maximize ? n - 1 - i : i;
      const double p = (std::pow(n - r, k) - std::pow(n - r - 1, k)) / std::pow(n, k);
      CHECK(count[i] / double(draws) == Approx(p).margin(0.006));
    }
  }
}

TEST_CASE("tournament selection treats failed individuals as the worst", "[hpo][operators]") {
  const std::vector<double> fitness{NAN, 5.0};
  for (auto d : {Direction::maximize, Direction::minimize}) {
    Rng rng(9);
    const auto chosen = select_tournament(fitness, 2, 40000, d, rng);
    // A failure wins only a tournament of failures: both draws NaN, 1/4.
    const auto failed = std::count(chosen.begin(), chosen.end(), std::size_t{0});
    CHECK(failed / 40000.0 == Approx(0.25).margin(0.01));
  }
  Rng rng(1);
  CHECK_THROWS_AS(select_tournament({}, 3, 1, Direction::maximize, rng), std::invalid_argument);
  CHECK_THROWS_AS(select_tournament(fitness, 0, 1, Direction::maximize, rng),
                  std::invalid_argument);
}

TEST_CASE("blend crossover keeps children in bounds, on the parents' line, with types intact",
          "[hpo][operators]") {
  const auto space = mixed_space();
  Rng rng(21);
  const double alpha = 0.5;
  int extrapolated = 0, swapped = 0, kept = 0;
  for (int i = 0; i < 20000; ++i) {
    const auto a = sample(space, rng), b = sample(space, rng);
    const auto [c1, c2] = crossover_blend(a, b, alpha, space, rng);
    REQUIRE(within(space, c1));
    REQUIRE(within(space, c2));
    for (std::size_t g = 0; g < space.params.size(); ++g) {
      const auto& p = space.params[g];
      if (is_real(p)) {
        const double x1 = to_search_scale(p, a[g]), x2 = to_search_scale(p, b[g]);
        const double y1 = to_search_scale(p, c1[g]), y2 = to_search_scale(p, c2[g]);
        const double lo = std::min(x1, x2), hi = std::max(x1, x2), d = hi - lo;
        for (double y : {y1, y2}) {
          REQUIRE(y >= lo - alpha * d - 1e-9);
          REQUIRE(y <= hi + alpha * d + 1e-9);
          extrapolated += (y < lo - 1e-12 || y > hi + 1e-12) ? 1 : 0;
        }
        // Unclamped children mirror each other about the parents' midpoint (in log space for lr).
        const bool inside = c1[g] > p.lo && c1[g] < p.hi && c2[g] > p.lo && c2[g] < p.hi;
        if (inside) REQUIRE(y1 + y2 == Approx(x1 + x2).margin(1e-9));
      } else {
        // Integer and choice genes are swapped whole, never blended.
        const bool same = c1[g] == a[g] && c2[g] == b[g];
        const bool swap = c1[g] == b[g] && c2[g] == a[g];
        REQUIRE((same || swap));
        if (a[g] != b[g]) (swap ? swapped : kept) += 1;
      }
    }
  }
  CHECK(extrapolated > 1000);  // alpha reaches beyond the parents
  CHECK(swapped == Approx(kept).epsilon(0.05));
}

TEST_CASE("blend crossover with alpha 0 stays between the parents", "[hpo][operators]") {
  const auto space = mixed_space();
  Rng rng(4);
  for (int i = 0; i < 5000; ++i) {
    const auto a = sample(space, rng), b = sample(space, rng);
    const auto [c1, c2] = crossover_blend(a, b, 0.0, space, rng);
    for (std::size_t g = 0; g < 2; ++g) {
      REQUIRE(c1[g] >= std::min(a[g], b[g]) * (1 - 1e-12));
      REQUIRE(c1[g] <= std::max(a[g], b[g]) * (1 + 1e-12));
    }
  }
  // Identical parents have identical children.
  const Genome same{0.2, 1e-3, 2, 1};
  const auto [c1, c2] = crossover_blend(same, same, 0.5, space, rng);
  CHECK(c1[0] == Approx(0.2));
  CHECK(c1[1] == Approx(1e-3));
  CHECK(c2 == c1);
}

TEST_CASE("Gaussian mutation keeps genes in bounds and types", "[hpo][operators]") {
  const auto space = mixed_space();
  Rng rng(8);
  for (int i = 0; i < 20000; ++i) {
    const auto g = sample(space, rng);
    REQUIRE(within(space, mutate_gaussian(g, 0.5, 1.0, space, rng)));
    REQUIRE(within(space, mutate_gaussian(g, 3.0, 0.5, space, rng)));
  }
  const Genome g{0.2, 1e-3, 2, 1};
  CHECK(mutate_gaussian(g, 0.5, 0.0, space, rng) == g);
  CHECK_THROWS_AS(mutate_gaussian(g, 0.1, 1.5, space, rng), std::invalid_argument);
  CHECK_THROWS_AS(mutate_gaussian(Genome{0.2}, 0.1, 0.5, space, rng), std::invalid_argument);
}

TEST_CASE("Gaussian mutation works in each parameter's own scale", "[hpo][operators]") {
  SearchSpace space;
  space.params.push_back({"u", ParamKind::uniform, 0.0, 10.0, {}});
  space.params.push_back({"l", ParamKind::log_uniform, 1e-4, 1.0, {}});
  const Genome start{5.0, 1e-2};
  const double sigma = 0.01;
  Rng rng(30);
  double su = 0.0, sl = 0.0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const auto m = mutate_gaussian(start, sigma, 1.0, space, rng);
    su += (m[0] - 5.0) * (m[0] - 5.0);
    sl += std::pow(std::log(m[1] / 1e-2), 2);
  }
  CHECK(std::sqrt(su / n) == Approx(sigma * 10.0).epsilon(0.05));
  // On the log scale: sigma times log(1 / 1e-4), the same relative step at 1e-2 as it would be at
  // 1e-4.
  CHECK(std::sqrt(sl / n) == Approx(sigma * std::log(1e4)).epsilon(0.05));
}

TEST_CASE("Gaussian mutation changes genes at the gene rate", "[hpo][operators]") {
  SearchSpace space;
  for (const char* name : {"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"})
    space.params.push_back({name, ParamKind::uniform, -1.0, 1.0, {}});
  const Genome zero(10, 0.0);
  Rng rng(2);
  int changed = 0;
  for (int i = 0; i < 5000; ++i) {
    const auto m = mutate_gaussian(zero, 0.1, 0.3, space, rng);
    for (double v : m) changed += v != 0.0 ? 1 : 0;
  }
  CHECK(changed / 50000.0 == Approx(0.3).margin(0.01));
}

TEST_CASE("integer and choice mutations always move when they fire", "[hpo][operators]") {
  SearchSpace space;
  space.params.push_back({"n", ParamKind::integer, 1, 3, {}});
  space.params.push_back({"opt", ParamKind::choice, 0, 0, {"a", "b", "c", "d"}});
  Rng rng(17);
  std::map<double, int> choices;
  for (int i = 0; i < 12000; ++i) {
    const Genome g{static_cast<double>(1 + i % 3), 2.0};
    // A tiny sigma would round to no change; the mutation still takes one step, inside the bounds.
    const auto m = mutate_gaussian(g, 1e-3, 1.0, space, rng);
    REQUIRE(within(space, m));
    REQUIRE(std::abs(m[0] - g[0]) == 1.0);
    REQUIRE(m[1] != 2.0);
    ++choices[m[1]];
  }
  REQUIRE(choices.size() == 3);
  for (const auto& kv : choices) CHECK(kv.second == Approx(4000).epsilon(0.08));
}

TEST_CASE("elites are the best e, best first, failures last", "[hpo][operators]") {
  const std::vector<double> f{3, NAN, 7, 1, 7};
  CHECK(elites(f, 3, Direction::maximize) == std::vector<std::size_t>{2, 4, 0});
  CHECK(elites(f, 5, Direction::minimize) == std::vector<std::size_t>{3, 0, 2, 4, 1});
  CHECK(elites(f, 5, Direction::maximize).back() == 1);
  CHECK(elites(f, 0, Direction::maximize).empty());
  CHECK_THROWS_AS(elites(f, 6, Direction::maximize), std::invalid_argument);
}

TEST_CASE("ring migration copies each deme's best over the next deme's worst", "[hpo][operators]") {
  auto deme = [](std::vector<double> fitness, int first_id) {
    Deme d;
    for (std::size_t i = 0; i < fitness.size(); ++i) {
      const int id = first_id + static_cast<int>(i);
      d.push_back({Genome{static_cast<double>(id)}, fitness[i], id});
    }
    return d;
  };
  std::vector<Deme> demes{deme({1, 9, 5, 3}, 0), deme({2, 4, 8, 6}, 10),
                          deme({7, 0, NAN, 2.5}, 20)};
  migrate_ring(demes, 2, Direction::maximize);

  auto ids = [](const Deme& d) {
    std::vector<int> out;
    for (const auto& ind : d) {
      REQUIRE(ind.genome[0] == ind.trial_id);  // genome and fitness travel together
      out.push_back(ind.trial_id);
    }
    return out;
  };
  // Deme 0 receives deme 2's original best (20, 23) over its worst (0, then 3).
  CHECK(ids(demes[0]) == std::vector<int>{20, 1, 2, 23});
  // Deme 1 receives deme 0's best (1, 2) over its worst (10, then 11).
  CHECK(ids(demes[1]) == std::vector<int>{1, 2, 12, 13});
  // Deme 2 receives deme 1's own best (12, 13), not deme 0's immigrants; the failure goes first.
  CHECK(ids(demes[2]) == std::vector<int>{20, 13, 12, 23});
  CHECK(demes[2][1].fitness == 6.0);
  CHECK(demes[0][0].fitness == 7.0);

  auto before = demes;
  migrate_ring(demes, 0, Direction::maximize);
  std::vector<Deme> one{demes[0]};
  migrate_ring(one, 2, Direction::maximize);
  CHECK(ids(one[0]) == ids(before[0]));
  CHECK_THROWS_AS(migrate_ring(demes, 5, Direction::maximize), std::invalid_argument);
}

TEST_CASE("ring migration minimizing moves the lowest fitnesses", "[hpo][operators]") {
  std::vector<Deme> demes{{{{0}, 1.0, 0}, {{1}, 5.0, 1}}, {{{2}, 2.0, 2}, {{3}, 4.0, 3}}};
  migrate_ring(demes, 1, Direction::minimize);
  CHECK(demes[1][1].trial_id == 0);  // 1.0, the best of deme 0, over 4.0, the worst of deme 1
  CHECK(demes[0][1].trial_id == 2);
  CHECK(demes[0][0].trial_id == 0);
}

// DEAP's mutpb: a child mutates with this probability, decided by one uniform draw first; then
// the genes are drawn, then the step adapts (one normal), then the chosen genes mutate at
// sigma x step. At probability 1 the first draw is skipped.
TEST_CASE("maybe_mutate mutates a child with the per-individual probability and adapts its step",
          "[hpo][operators]") {
  const auto space = mixed_space();
  const Offspring parent{{0.25, 1e-3, 3, 1}, 0.5};
  const MutationSettings m{0.3, 0.1, 1.0, 0.7};
  int fired = 0;
  for (std::uint64_t seed = 1; seed <= 40; ++seed) {
    Rng draw(seed), expected_rng(seed);
    Offspring expected = parent;
    if (expected_rng.uniform_double() < 0.3) {
      ++fired;
      const auto genes = genes_to_mutate(4, 1.0, expected_rng);
      expected.step = 0.5 * std::exp(0.7 * static_cast<double>(expected_rng.normal()));
      expected.genome =
          mutate_genes(parent.genome, genes, 0.1 * expected.step, space, expected_rng);
    }
    const auto child = maybe_mutate(parent, m, space, draw);
    CHECK(child.genome == expected.genome);
    CHECK(child.step == expected.step);
    Rng never(seed);
    const auto copy = maybe_mutate(parent, {0.0, 0.1, 1.0, 0.7}, space, never);
    CHECK(copy.genome == parent.genome);
    CHECK(copy.step == parent.step);
  }
  CHECK(fired > 5);
  CHECK(fired < 25);
}

TEST_CASE("a mutation that draws no gene leaves the child and its step unchanged",
          "[hpo][operators]") {
  const auto space = mixed_space();
  const Offspring parent{{0.25, 1e-3, 3, 1}, 2.0};
  Rng rng(7);
  const auto child = maybe_mutate(parent, {1.0, 0.1, 0.0, 1.0}, space, rng);
  CHECK(child.genome == parent.genome);
  CHECK(child.step == 2.0);
  // Without self-adaptation the step stays and the genes mutate at sigma alone.
  Rng a(9), b(9);
  const auto plain = maybe_mutate(parent, {1.0, 0.1, 1.0, 0.0}, space, a);
  CHECK(plain.step == 2.0);
  CHECK(plain.genome == mutate_gaussian(parent.genome, 0.2, 1.0, space, b));
}

TEST_CASE("self-adapted steps are log-normal, capped, and blend geometrically",
          "[hpo][operators]") {
  Rng rng(3), reference(3);
  const double z = static_cast<double>(reference.normal());
  CHECK(self_adapted_step(0.5, 0.4, 0.0, rng) == 0.5 * std::exp(0.4 * z));
  Rng big(3);
  CHECK(self_adapted_step(1e6, 0.4, 10.0, big) == 10.0);
  CHECK(blended_step(4.0, 0.25) == 1.0);
  CHECK(blended_step(2.0, 2.0) == 2.0);
  CHECK(step_tau(1.0, 4) == 0.5);
  CHECK(step_tau(2.0, 1) == 2.0);
  CHECK(step_tau(1.0, 0) == 0.0);
}

TEST_CASE("genes_to_mutate draws one uniform per gene, in order", "[hpo][operators]") {
  Rng rng(11), reference(11);
  std::vector<std::size_t> expected;
  for (std::size_t i = 0; i < 6; ++i)
    if (reference.uniform_double() < 0.4) expected.push_back(i);
  CHECK(genes_to_mutate(6, 0.4, rng) == expected);
  Rng all(1);
  CHECK(genes_to_mutate(3, 1.0, all) == std::vector<std::size_t>{0, 1, 2});
  Rng none(1);
  CHECK(genes_to_mutate(3, 0.0, none).empty());
  CHECK_THROWS_AS(genes_to_mutate(3, 1.5, none), std::invalid_argument);
}

TEST_CASE("the mutation scale shrinks by the decay every bred generation", "[hpo][operators]") {
  CHECK(scheduled_sigma(0.1, 0.5, 1) == 0.1);
  CHECK(scheduled_sigma(0.1, 0.5, 2) == 0.05);
  CHECK(scheduled_sigma(0.1, 0.5, 3) == 0.025);
  CHECK(scheduled_sigma(0.2, 1.0, 9) == 0.2);
  CHECK(scheduled_sigma(0.2, 0.5, 0) == 0.2);  // the random first generation is not bred
}

TEST_CASE("mate blends with the crossover rate, or copies the parents with their steps",
          "[hpo][operators]") {
  const SearchSpace space = mixed_space();
  const Individual a{{0.1, 1e-3, 3.0, 0.0}, 1.0, 0, 4.0};
  const Individual b{{0.4, 1e-2, 5.0, 2.0}, 2.0, 1, 0.25};
  // A draw below the rate blends: the same blend that crossover_blend makes after that draw.
  Rng rng(8), reference(8);
  const double draw = reference.uniform_double();
  REQUIRE(draw < 0.9);
  const auto [c1, c2] = mate(a, b, 0.9, 0.5, space, rng);
  const auto [g1, g2] = crossover_blend(a.genome, b.genome, 0.5, space, reference);
  CHECK(c1.genome == g1);
  CHECK(c2.genome == g2);
  CHECK(c1.step == 1.0);  // sqrt(4 x 0.25)
  CHECK(c2.step == 1.0);
  // A draw at or above the rate copies.
  Rng copy_rng(8);
  const auto [d1, d2] = mate(a, b, draw, 0.5, space, copy_rng);
  CHECK(d1.genome == a.genome);
  CHECK(d2.genome == b.genome);
  CHECK(d1.step == 4.0);
  CHECK(d2.step == 0.25);
}

TEST_CASE("steady-state replacement drops the worst, the earliest among equals",
          "[hpo][operators]") {
  auto ind = [](double fitness, int id) { return Individual{{0.0}, fitness, id, 1.0}; };
  auto ids = [](const Deme& d) {
    std::vector<int> out;
    for (const auto& i : d) out.push_back(i.trial_id);
    return out;
  };
  Deme population{ind(3.0, 0), ind(1.0, 1), ind(2.0, 2)};
  // Room left: the child joins.
  replace_worst(population, ind(0.5, 3), 4, Direction::maximize);
  CHECK(ids(population) == std::vector<int>{0, 1, 2, 3});
  // Full: the worst (0.5, trial 3) leaves.
  replace_worst(population, ind(2.5, 4), 4, Direction::maximize);
  CHECK(ids(population) == std::vector<int>{0, 1, 2, 4});
  // A child worse than all leaves at once.
  replace_worst(population, ind(0.1, 5), 4, Direction::maximize);
  CHECK(ids(population) == std::vector<int>{0, 1, 2, 4});
  // Equal to the worst: the earliest of them (trial 1) leaves, the child stays.
  replace_worst(population, ind(1.0, 6), 4, Direction::maximize);
  CHECK(ids(population) == std::vector<int>{0, 2, 4, 6});
  // Minimizing, the largest leaves; a failed child never joins.
  replace_worst(population, ind(1.5, 7), 4, Direction::minimize);
  CHECK(ids(population) == std::vector<int>{2, 4, 6, 7});
  replace_worst(population, ind(std::nan(""), 8), 5, Direction::minimize);
  CHECK(ids(population) == std::vector<int>{2, 4, 6, 7});
}
