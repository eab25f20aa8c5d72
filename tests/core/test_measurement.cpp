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

TEST_CASE("the CPU's model name comes from /proc/cpuinfo", "[measurement]") {
  const std::string name = cpu_model_name();
  CHECK_FALSE(name.empty());
  CHECK(name.find("model name") == std::string::npos);  // the value, not the line
}
