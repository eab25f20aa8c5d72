// The timeline's summaries that strata calibrate reads: the seconds per event name and when each
// event ended.
#include <catch2/catch.hpp>

#include <chrono>
#include <thread>

#include "core/trace.hpp"

using namespace strata;

TEST_CASE("a trace gives the end of each event of a name, in order", "[trace]") {
  Trace trace;
  const auto sleep_ms = [](int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); };
  for (int step = 0; step < 3; ++step) {
    {
      TraceSpan forward(&trace, "forward", "compute");
      sleep_ms(2);
    }
    {
      TraceSpan optimizer(&trace, "optimizer step", "compute");
      sleep_ms(1);
    }
  }
  const std::vector<double> ends = trace.end_times("optimizer step");
  REQUIRE(ends.size() == 3);
  // Each step took at least its 3 ms of sleep, and the ends are the optimizer's, not forward's.
  CHECK(ends[0] >= 0.003);
  CHECK(ends[1] - ends[0] >= 0.003);
  CHECK(ends[2] - ends[1] >= 0.003);
  CHECK(trace.end_times("forward").size() == 3);
  CHECK(trace.end_times("forward")[2] < ends[2]);
  CHECK(trace.end_times("forward")[2] > ends[1]);
  CHECK(trace.end_times("backward").empty());
  CHECK(trace.totals().at("optimizer step") >= 0.003);
}
