// Function objectives: known values, domains, and deterministic artificial evaluation times.
#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "hpo/objectives.hpp"

using namespace strata;

TEST_CASE("objectives have their known values", "[hpo][objectives]") {
  const std::vector<double> zero(10, 0.0), one(10, 1.0), two{1.0, 2.0};
  CHECK(sphere(zero) == 0.0);
  CHECK(sphere(two) == 5.0);
  CHECK(rastrigin(zero) == 0.0);
  CHECK(rastrigin(one) == Approx(10.0));  // each coordinate adds 1 - 10 cos(2 pi) + 10
  CHECK(rastrigin(std::vector<double>{0.5}) == Approx(20.25));
  CHECK(rosenbrock(one) == 0.0);
  CHECK(rosenbrock(zero) == Approx(9.0));
  CHECK(rosenbrock(std::vector<double>{-1.0, 1.0}) == Approx(4.0));
  CHECK(ackley(zero) == 0.0);
  CHECK(ackley(std::vector<double>{1.0, 1.0}) == Approx(3.6253849384));
  for (auto k : {ObjectiveKind::sphere, ObjectiveKind::rastrigin, ObjectiveKind::ackley})
    CHECK(evaluate_objective(k, zero) == 0.0);
  CHECK(evaluate_objective(ObjectiveKind::rosenbrock, one) == 0.0);
  CHECK(evaluate_objective(ObjectiveKind::sphere, two) == 5.0);
}

TEST_CASE("objective spaces are n uniform parameters over the usual domains", "[hpo][objectives]") {
  const auto r = objective_space("rastrigin", 10);
  REQUIRE(r.params.size() == 10);
  CHECK(r.params[9].name == "x9");
  CHECK(r.params[0].kind == ParamKind::uniform);
  CHECK(r.params[0].lo == -5.12);
  CHECK(r.params[0].hi == 5.12);
  CHECK(objective_space("ackley", 2).params[1].hi == 32.768);
  CHECK(objective_space("rosenbrock", 2).params[0].lo == -2.048);
  CHECK(parse_objective("sphere") == ObjectiveKind::sphere);
  CHECK_THROWS_WITH(objective_space("griewank", 2), Catch::Matchers::Contains("'griewank'"));
  CHECK_THROWS_AS(objective_space("sphere", 0), std::invalid_argument);
}

TEST_CASE("artificial evaluation times are deterministic per trial", "[hpo][objectives]") {
  const EvalTime time{2.0, 0.5};
  CHECK(eval_seconds(time, 7, 3) == eval_seconds(time, 7, 3));
  CHECK(eval_seconds(time, 7, 3) != eval_seconds(time, 7, 4));
  CHECK(eval_seconds(time, 7, 3) != eval_seconds(time, 8, 3));
  CHECK(eval_seconds({1.5, 0.0}, 7, 3) == 1.5);
  CHECK(eval_seconds({}, 7, 3) == 0.0);

  double sum = 0.0, sq = 0.0;
  const int n = 20000;
  for (int i = 0; i < n; ++i) {
    const double s = eval_seconds(time, 1, i);
    sum += s;
    sq += s * s;
  }
  const double mean = sum / n;
  CHECK(mean == Approx(2.0).epsilon(0.02));
  CHECK(std::sqrt(sq / n - mean * mean) == Approx(0.5).epsilon(0.05));
  // Truncated at zero, never negative even with a large spread.
  for (int i = 0; i < 1000; ++i) REQUIRE(eval_seconds({0.1, 1.0}, 2, i) >= 0.0);
  CHECK_THROWS_AS(eval_seconds({-1.0, 0.0}, 1, 0), std::invalid_argument);
}
