// Search spaces: validation messages, sampling within bounds and types, clamping and display.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/config_names.hpp"
#include "core/rng.hpp"
#include "hpo/search_space.hpp"

using namespace strata;

namespace {

SearchSpace mixed_space() {
  SearchSpace s;
  s.params.push_back({"dropout", ParamKind::uniform, 0.0, 0.5, {}});
  s.params.push_back({"lr", ParamKind::log_uniform, 1e-5, 1e-1, {}});
  s.params.push_back({"layers", ParamKind::integer, 1, 6, {}});
  s.params.push_back({"optimizer", ParamKind::choice, 0, 0, {"sgd", "adam", "rmsprop"}});
  return s;
}

std::string error_of(const ParamSpec& p) {
  try {
    validate(p);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  FAIL("no std::invalid_argument for " << p.name);
  return {};
}

}  // namespace

TEST_CASE("invalid parameter specs are rejected with their name and numbers", "[hpo][space]") {
  using Catch::Matchers::Contains;
  CHECK_THAT(error_of({"lr", ParamKind::uniform, 0.3, 0.1, {}}),
             Contains("'lr'") && Contains("0.3") && Contains("0.1"));
  CHECK_THAT(error_of({"wd", ParamKind::uniform, 0.5, 0.5, {}}), Contains("'wd'"));
  CHECK_THAT(error_of({"lr", ParamKind::log_uniform, 0.0, 0.1, {}}),
             Contains("'lr'") && Contains("positive") && Contains("[0, 0.1]"));
  CHECK_THAT(error_of({"lr", ParamKind::log_uniform, -1.0, 0.1, {}}), Contains("-1"));
  CHECK_THAT(error_of({"units", ParamKind::integer, 1.5, 8, {}}),
             Contains("'units'") && Contains("1.5") && Contains("integers"));
  CHECK_THAT(error_of({"units", ParamKind::integer, 9, 8, {}}), Contains("[9, 8]"));
  CHECK_THAT(error_of({"opt", ParamKind::choice, 0, 0, {}}),
             Contains("'opt'") && Contains("no values"));
  CHECK_THAT(error_of({"opt", ParamKind::choice, 0, 0, {"sgd", "sgd"}}), Contains("twice"));
  CHECK_THAT(error_of({"x", ParamKind::uniform, 0.0, INFINITY, {}}), Contains("finite"));
  CHECK_THAT(error_of({"x", ParamKind::uniform, NAN, 1.0, {}}), Contains("'x'"));

  // Valid edge cases: a pinned integer, a single choice.
  CHECK_NOTHROW(validate(ParamSpec{"units", ParamKind::integer, 8, 8, {}}));
  CHECK_NOTHROW(validate(ParamSpec{"opt", ParamKind::choice, 0, 0, {"adam"}}));

  auto twice = mixed_space();
  twice.params.push_back(twice.params[0]);
  CHECK_THROWS_WITH(validate(twice), Contains("'dropout'") && Contains("twice"));
  CHECK_THROWS_AS(validate(SearchSpace{}), std::invalid_argument);
}

TEST_CASE("parameter kinds have the YAML's names, in the config's one table", "[hpo][space]") {
  const std::vector<std::string> names{"uniform", "log_uniform", "int", "choice"};
  std::vector<std::string> written;
  for (auto k : {ParamKind::uniform, ParamKind::log_uniform, ParamKind::integer, ParamKind::choice})
    written.emplace_back(strata::to_string(k));
  CHECK(written == names);
  // describe_value is the one formatting of a value: what replaces $name in a trial's config, the
  // journal's text and the log's.
  const ParamSpec units{"units", ParamKind::integer, 8, 1e6, {}};
  CHECK(strata::describe_value(units, 1e6) == "1000000");  // never 1e+06
  const ParamSpec opt{"opt", ParamKind::choice, 0, 0, {"sgd", "adam"}};
  CHECK(strata::describe_value(opt, 1) == "adam");
  const ParamSpec lr{"lr", ParamKind::log_uniform, 1e-4, 0.1, {}};
  CHECK(strata::describe_value(lr, 0.1 + 0.2) == "0.30000000000000004");  // round-trips
  CHECK(strata::probe_values(lr).size() == 3);
  CHECK(strata::probe_values(units) == std::vector<std::string>{"8", "1000000"});
}

TEST_CASE("samples obey bounds and types over many draws", "[hpo][space]") {
  const auto space = mixed_space();
  Rng rng(11);
  std::vector<int> layer_counts(6, 0), choice_counts(3, 0);
  std::vector<double> log_lr;
  for (int i = 0; i < 20000; ++i) {
    const auto g = sample(space, rng);
    REQUIRE(within(space, g));
    REQUIRE(g[2] == std::floor(g[2]));
    REQUIRE(g[3] == std::floor(g[3]));
    ++layer_counts[static_cast<std::size_t>(g[2] - 1)];
    ++choice_counts[static_cast<std::size_t>(g[3])];
    log_lr.push_back(std::log10(g[1]));
  }
  // Every integer and every choice is drawn, the end points included, roughly equally often.
  for (int c : layer_counts) CHECK(c == Approx(20000 / 6.0).epsilon(0.1));
  for (int c : choice_counts) CHECK(c == Approx(20000 / 3.0).epsilon(0.1));
  // log_uniform is uniform in the exponent: the median of log10(lr) is the middle, -3, where a
  // linear draw over [1e-5, 0.1] would put it near log10(0.05).
  std::nth_element(log_lr.begin(), log_lr.begin() + 10000, log_lr.end());
  CHECK(log_lr[10000] == Approx(-3.0).margin(0.1));
}

TEST_CASE("a gene at a fraction of its range", "[hpo][space]") {
  const SearchSpace s = mixed_space();
  CHECK(value_at(s.params[0], 0.5) == Approx(0.25));
  CHECK(value_at(s.params[1], 0.5) == Approx(std::sqrt(1e-5 * 1e-1)));  // the log midpoint
  CHECK(value_at(s.params[1], 1.0) == Approx(1e-1));
  // Six integers in six equal shares: [0, 1/6) is 1, ..., [5/6, 1] is 6.
  CHECK(value_at(s.params[2], 0.0) == 1);
  CHECK(value_at(s.params[2], 0.17) == 2);
  CHECK(value_at(s.params[2], 1.0) == 6);
  CHECK(value_at(s.params[3], 0.34) == 1);
  CHECK(value_at(s.params[3], 1.0) == 2);
}

TEST_CASE("a Latin hypercube puts one point in each stratum of every parameter", "[hpo][space]") {
  const SearchSpace s = mixed_space();
  Rng rng(11);
  const std::vector<Genome> design = latin_hypercube(s, 6, rng);
  REQUIRE(design.size() == 6);
  std::vector<int> dropout_strata, layers;
  for (const Genome& g : design) {
    CHECK(within(s, g));
    dropout_strata.push_back(static_cast<int>(g[0] / 0.5 * 6));
    layers.push_back(static_cast<int>(g[2]));
  }
  std::sort(dropout_strata.begin(), dropout_strata.end());
  std::sort(layers.begin(), layers.end());
  CHECK(dropout_strata == std::vector<int>{0, 1, 2, 3, 4, 5});
  CHECK(layers == std::vector<int>{1, 2, 3, 4, 5, 6});  // six integers, six strata: each once
  // The strata are paired at random: another stream pairs them otherwise.
  Rng other(12);
  CHECK(latin_hypercube(s, 6, other) != design);
}

TEST_CASE("within rejects wrong lengths, out-of-bounds and non-integral genes", "[hpo][space]") {
  const auto space = mixed_space();
  CHECK(within(space, {0.25, 1e-3, 3, 1}));
  CHECK_FALSE(within(space, {0.25, 1e-3, 3}));
  CHECK_FALSE(within(space, {0.6, 1e-3, 3, 1}));
  CHECK_FALSE(within(space, {0.25, 1e-6, 3, 1}));
  CHECK_FALSE(within(space, {0.25, 1e-3, 3.5, 1}));
  CHECK_FALSE(within(space, {0.25, 1e-3, 7, 1}));
  CHECK_FALSE(within(space, {0.25, 1e-3, 3, 3}));
  CHECK_FALSE(within(space, {0.25, 1e-3, 3, -1}));
  CHECK_FALSE(within(space, {NAN, 1e-3, 3, 1}));
}

TEST_CASE("clamp makes any genome legal", "[hpo][space]") {
  const auto space = mixed_space();
  const auto g = clamp(space, {-1.0, 5.0, 3.6, 7.2});
  CHECK(g == Genome{0.0, 0.1, 4.0, 2.0});
  CHECK(within(space, clamp(space, {NAN, NAN, NAN, NAN})));
  CHECK_THROWS_AS(clamp(space, {0.1}), std::invalid_argument);
}

TEST_CASE("values are described as a user reads them", "[hpo][space]") {
  const auto space = mixed_space();
  CHECK(describe_value(space.params[3], 1.0) == "adam");
  CHECK(describe_value(space.params[2], 4.0) == "4");
  CHECK(describe_value(ParamSpec{"n", ParamKind::integer, 0, 1e7, {}}, 1e6) == "1000000");
  CHECK(describe_value(space.params[1], 0.001) == "0.001");
  CHECK(describe_value(space.params[0], 0.1 + 0.2) == "0.30000000000000004");
  CHECK(describe(space, {0.25, 1e-3, 3, 2}) ==
        "dropout=0.25, lr=0.001, layers=3, optimizer=rmsprop");
}
