// The measuring helpers shared by strata calibrate and the benchmarks.
#include <catch2/catch.hpp>

#include "core/measurement.hpp"

using namespace strata;

TEST_CASE("the median of timings takes the middle one, or the mean of the middle two",
          "[measurement]") {
  CHECK(median({3.0, 1.0, 2.0}) == 2.0);
  CHECK(median({4.0, 1.0, 3.0, 2.0}) == 2.5);
  CHECK(median({7.0}) == 7.0);
  CHECK(median({}) == 0.0);
}

TEST_CASE("the mean of timings", "[measurement]") {
  CHECK(mean({3.0, 1.0, 2.0}) == 2.0);
  CHECK(mean({0.5, 1.5}) == 1.0);
  CHECK(mean({}) == 0.0);
}

TEST_CASE("quantiles sit at the middles of equal slices of probability", "[measurement]") {
  // Four values each stand for a quarter: 4 quantiles are the values themselves, sorted.
  CHECK(quantiles({4.0, 1.0, 3.0, 2.0}, 4) == std::vector<double>{1.0, 2.0, 3.0, 4.0});
  // Halves: at 0.25 and 0.75, between the first two and the last two.
  CHECK(quantiles({4.0, 1.0, 3.0, 2.0}, 2) == std::vector<double>{1.5, 3.5});
  CHECK(quantiles({4.0, 1.0, 3.0, 2.0}, 1) == std::vector<double>{2.5});
  // More points than values: the ends are clamped, the middle interpolated.
  CHECK(quantiles({1.0, 3.0}, 4) == std::vector<double>{1.0, 1.5, 2.5, 3.0});
  CHECK(quantiles({}, 3).empty());
}

TEST_CASE("the CPU's model name comes from /proc/cpuinfo", "[measurement]") {
  const std::string name = cpu_model_name();
  CHECK_FALSE(name.empty());
  CHECK(name.find("model name") == std::string::npos);  // the value, not the line
}
