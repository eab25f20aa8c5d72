// The pruning rules stop exactly the trials they name on hand-made histories: the median rule
// below the median of the other trials at the same epoch, ASHA outside the top 1/eta at a rung.
#include <catch2/catch.hpp>

#include <cmath>
#include <stdexcept>
#include <vector>

#include "hpo/pruning.hpp"

using namespace strata;

TEST_CASE("the median rule stops a value worse than the others' median", "[hpo][pruning]") {
  const std::vector<double> others{0.70, 0.80, 0.75, 0.60, 0.90};  // median 0.75
  CHECK(median_stops(0.74, others, 5, Direction::maximize));
  CHECK_FALSE(median_stops(0.75, others, 5, Direction::maximize));  // equal goes on
  CHECK_FALSE(median_stops(0.76, others, 5, Direction::maximize));
  // Too few others: nothing is stopped yet.
  CHECK_FALSE(median_stops(0.10, others, 6, Direction::maximize));
  // An even count: the mean of the middle two (0.725); minimizing, above it stops.
  const std::vector<double> four{0.70, 0.80, 0.75, 0.60};
  CHECK(median_stops(0.73, four, 4, Direction::minimize));
  CHECK_FALSE(median_stops(0.72, four, 4, Direction::minimize));
  // Failed values are not others; a failed value itself is stopped.
  const std::vector<double> with_nan{0.70, std::nan(""), 0.80};
  CHECK_FALSE(median_stops(0.10, with_nan, 3, Direction::maximize));
  CHECK(median_stops(std::nan(""), others, 5, Direction::maximize));
}

TEST_CASE("ASHA keeps the top 1/eta at a rung, and the best when there are fewer than eta",
          "[hpo][pruning]") {
  // 7 values at the rung, eta 3: the 2 best go on (0.9 and 0.8).
  const std::vector<double> rung{0.5, 0.9, 0.6, 0.8, 0.7, 0.4, 0.3};
  CHECK_FALSE(asha_stops(0.9, rung, 3, Direction::maximize));
  CHECK_FALSE(asha_stops(0.8, rung, 3, Direction::maximize));
  CHECK(asha_stops(0.7, rung, 3, Direction::maximize));
  // Two values at the rung: only the better goes on.
  CHECK_FALSE(asha_stops(0.6, std::vector<double>{0.6, 0.5}, 3, Direction::maximize));
  CHECK(asha_stops(0.5, std::vector<double>{0.6, 0.5}, 3, Direction::maximize));
  // The first trial at a rung always goes on; minimizing, the smallest are the best.
  CHECK_FALSE(asha_stops(0.5, std::vector<double>{0.5}, 3, Direction::maximize));
  CHECK(asha_stops(0.8, rung, 3, Direction::minimize));
  CHECK_FALSE(asha_stops(0.4, rung, 3, Direction::minimize));
  CHECK(is_rung(1, 1, 3));
  CHECK(is_rung(3, 1, 3));
  CHECK(is_rung(9, 1, 3));
  CHECK_FALSE(is_rung(2, 1, 3));
  CHECK_FALSE(is_rung(1, 2, 2));
  CHECK(is_rung(8, 2, 2));
}

TEST_CASE("the median pruner stops exactly the trials its rule names on a history",
          "[hpo][pruning]") {
  Pruner pruner({PruneRule::median, 2, 3, 3}, Direction::maximize);
  // Epoch 1 is before after_epochs: nothing is stopped, however bad.
  CHECK_FALSE(pruner.report(0, 1, 0.80));
  CHECK_FALSE(pruner.report(1, 1, 0.10));
  // Epoch 2: trials 0-2 go on (fewer than 3 others), then the median of 0.82, 0.50, 0.70 is 0.70.
  CHECK_FALSE(pruner.report(0, 2, 0.82));
  CHECK_FALSE(pruner.report(1, 2, 0.50));
  CHECK_FALSE(pruner.report(2, 2, 0.70));
  CHECK(pruner.report(3, 2, 0.65));
  CHECK_FALSE(pruner.report(4, 2, 0.71));
  // Trial 5 against 0.82, 0.50, 0.70, 0.65, 0.71 (median 0.70).
  CHECK(pruner.report(5, 2, 0.69));
  CHECK_FALSE(pruner.report(6, 2, 0.70));
  // A resumed trial reporting its epoch again replaces its value, not adds one.
  CHECK_FALSE(pruner.report(6, 2, 0.70));
  CHECK(pruner.curve(0) == std::vector<double>{0.80, 0.82});
  // Trial 3 reported no epoch 1: NaN there.
  const auto curve3 = pruner.curve(3);
  REQUIRE(curve3.size() == 2);
  CHECK(std::isnan(curve3[0]));
  CHECK(curve3[1] == 0.65);
  // The history comes back from the journal's curves.
  Pruner restored({PruneRule::median, 2, 3, 3}, Direction::maximize);
  for (int t = 0; t <= 6; ++t) restored.restore(t, pruner.curve(t));
  CHECK(restored.report(7, 2, 0.69));
  CHECK_FALSE(restored.report(8, 2, 0.705));
}

TEST_CASE("the ASHA pruner decides only at its rungs", "[hpo][pruning]") {
  Pruner pruner({PruneRule::asha, 1, 5, 2}, Direction::maximize);
  // Rungs at epochs 1, 2, 4.
  CHECK_FALSE(pruner.report(0, 1, 0.6));
  CHECK(pruner.report(1, 1, 0.5));         // 2 at the rung: keep the best 1
  CHECK_FALSE(pruner.report(2, 1, 0.7));   // 3 at the rung: keep 1, and 0.7 is it
  CHECK_FALSE(pruner.report(3, 1, 0.65));  // 4: keep the best 2 (0.7, 0.65)
  CHECK_FALSE(pruner.report(0, 2, 0.62));
  CHECK_FALSE(pruner.report(0, 3, 0.10));  // not a rung
  CHECK(pruner.report(2, 2, 0.61));        // 2 at rung 2: 0.62 is the best
  CHECK_FALSE(pruner.report(0, 4, 0.64));
}

TEST_CASE("pruning settings are checked", "[hpo][pruning]") {
  CHECK_THROWS_AS(Pruner({PruneRule::median, 0, 5, 3}, Direction::maximize), std::invalid_argument);
  CHECK_THROWS_AS(Pruner({PruneRule::asha, 1, 5, 1}, Direction::maximize), std::invalid_argument);
}
