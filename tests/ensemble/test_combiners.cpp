// Ensemble combiners on hand-made predictions: the mean, the weighted mean, the vote and its tie
// rule; the mean of identical members is that member, exactly.
#include <catch2/catch.hpp>

#include <vector>

#include "ensemble/combiners.hpp"

using namespace strata;

namespace {

// Two samples of three classes per member.
Predictions member(std::vector<float> p) {
  return Predictions{3, std::move(p)};
}

}  // namespace

TEST_CASE("the mean and the weighted mean of members' probabilities", "[ensemble]") {
  const std::vector<Predictions> members{member({0.5f, 0.25f, 0.25f, 0.0f, 1.0f, 0.0f}),
                                         member({0.25f, 0.5f, 0.25f, 0.5f, 0.5f, 0.0f})};
  const Predictions mean = combine_mean(members);
  CHECK(mean.probabilities == std::vector<float>{0.375f, 0.375f, 0.25f, 0.25f, 0.75f, 0.0f});
  const std::vector<double> weights{3.0, 1.0};  // normalised to 0.75 and 0.25
  const Predictions weighted = combine_mean(members, weights);
  CHECK(weighted.probabilities[0] == Approx(0.4375));
  CHECK(weighted.probabilities[1] == Approx(0.3125));
  CHECK(weighted.probabilities[3] == Approx(0.125));
  CHECK(predicted_classes(weighted) == std::vector<int>{0, 1});
  CHECK(accuracy_weights(std::vector<double>{0.8, 0.6}) ==
        std::vector<double>{0.8 / 1.4, 0.6 / 1.4});
  CHECK_THROWS_AS(combine_mean(members, std::vector<double>{1.0}), std::invalid_argument);
  CHECK_THROWS_AS(combine_mean(members, std::vector<double>{0.0, 0.0}), std::invalid_argument);
  const std::vector<Predictions> mixed{member({1, 0, 0, 1, 0, 0}), Predictions{2, {1, 0, 1, 0}}};
  CHECK_THROWS_AS(combine_mean(mixed), std::invalid_argument);
}

TEST_CASE("the mean of identical members is that member, to the bit", "[ensemble]") {
  const Predictions one = member({0.1f, 0.7f, 0.2f, 0.333333f, 0.333333f, 0.333334f});
  for (const int n : {1, 2, 3, 5, 7}) {
    const std::vector<Predictions> same(static_cast<std::size_t>(n), one);
    CHECK(combine_mean(same).probabilities == one.probabilities);
  }
}

TEST_CASE(
    "a vote takes the most common class; ties go to the highest summed probability, then "
    "the lowest class",
    "[ensemble]") {
  // Sample 0: votes 0, 1, 1 -> class 1. Sample 1: votes 2, 0, 1 -> a three-way tie; the summed
  // probabilities 1.0, 1.1, 0.9 give class 1.
  const std::vector<Predictions> three{member({0.6f, 0.3f, 0.1f, 0.1f, 0.3f, 0.6f}),
                                       member({0.2f, 0.7f, 0.1f, 0.7f, 0.2f, 0.1f}),
                                       member({0.1f, 0.8f, 0.1f, 0.2f, 0.6f, 0.2f})};
  CHECK(combine_vote(three) == std::vector<int>{1, 1});
  // Two members that disagree with equal probabilities: the lowest class wins.
  const std::vector<Predictions> even{member({0.5f, 0.0f, 0.5f, 0.5f, 0.5f, 0.0f}),
                                      member({0.0f, 0.5f, 0.5f, 0.5f, 0.5f, 0.0f})};
  // Sample 0: member 0 votes 0 (0.5 first), member 1 votes 1; the sums 0.5, 0.5, 1.0 favour
  // neither voted class: class 0, the lower. Sample 1: both vote 0.
  CHECK(combine_vote(even) == std::vector<int>{0, 0});
  CHECK(accuracy(combine_vote(three), std::vector<std::int32_t>{1, 0}) == 0.5);
}
