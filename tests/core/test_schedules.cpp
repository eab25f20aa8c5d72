// Learning-rate schedules: exact values at warmup edges, step boundaries and cosine landmarks.
#include <catch2/catch.hpp>

#include <cmath>

#include "core/lr_schedule.hpp"

using namespace strata;

namespace {

ScheduleSpec spec(ScheduleKind kind, double warmup_epochs = 0.0) {
  ScheduleSpec s;
  s.kind = kind;
  s.warmup_epochs = warmup_epochs;
  return s;
}

}  // namespace

TEST_CASE("constant schedule returns the base rate at every step", "[schedule]") {
  const LrSchedule schedule(spec(ScheduleKind::constant), 0.05, 10, 3);
  for (std::int64_t step : {0, 1, 9, 10, 29, 30, 1000}) {
    INFO("step " << step);
    CHECK(schedule.at(step) == 0.05);
  }
}

TEST_CASE("linear warmup ramps to the base rate over warmup_epochs, then hands over",
          "[schedule]") {
  // 1.5 warmup epochs of 10 steps = 15 warmup steps; step s runs at base * (s+1)/15, so the first
  // step is not wasted at lr 0 and the last warmup step reaches the base rate.
  const LrSchedule schedule(spec(ScheduleKind::constant, 1.5), 0.3, 10, 4);
  CHECK(schedule.at(0) == Approx(0.3 / 15).epsilon(1e-12));
  CHECK(schedule.at(7) == Approx(0.3 * 8 / 15).epsilon(1e-12));  // mid-warmup
  CHECK(schedule.at(13) == Approx(0.3 * 14 / 15).epsilon(1e-12));
  CHECK(schedule.at(14) == Approx(0.3).epsilon(1e-12));  // end of warmup
  CHECK(schedule.at(15) == 0.3);
  CHECK(schedule.at(39) == 0.3);
  // Strictly increasing through the warmup.
  for (std::int64_t s = 1; s < 15; ++s) CHECK(schedule.at(s) > schedule.at(s - 1));
}

TEST_CASE("step schedule multiplies by gamma every step_epochs", "[schedule]") {
  ScheduleSpec s = spec(ScheduleKind::step);
  s.step_epochs = 2.0;
  s.gamma = 0.5;
  SECTION("without warmup, boundaries at multiples of step_epochs * steps_per_epoch") {
    const LrSchedule schedule(s, 0.8, 10, 10);
    CHECK(schedule.at(0) == 0.8);
    CHECK(schedule.at(19) == 0.8);  // last step before the first boundary
    CHECK(schedule.at(20) == Approx(0.4).epsilon(1e-12));
    CHECK(schedule.at(39) == Approx(0.4).epsilon(1e-12));
    CHECK(schedule.at(40) == Approx(0.2).epsilon(1e-12));
    CHECK(schedule.at(99) == Approx(0.8 * 0.0625).epsilon(1e-12));
  }
  SECTION("with warmup, the boundaries count from the end of the warmup") {
    s.warmup_epochs = 1.0;
    const LrSchedule schedule(s, 0.8, 10, 10);
    CHECK(schedule.at(4) == Approx(0.8 * 5 / 10).epsilon(1e-12));
    CHECK(schedule.at(10) == 0.8);
    CHECK(schedule.at(29) == 0.8);
    CHECK(schedule.at(30) == Approx(0.4).epsilon(1e-12));
    CHECK(schedule.at(50) == Approx(0.2).epsilon(1e-12));
  }
  SECTION("fractional step_epochs") {
    s.step_epochs = 0.5;
    s.gamma = 0.1;
    const LrSchedule schedule(s, 1.0, 8, 4);  // a drop every 4 steps
    CHECK(schedule.at(3) == 1.0);
    CHECK(schedule.at(4) == Approx(0.1).epsilon(1e-12));
    CHECK(schedule.at(8) == Approx(0.01).epsilon(1e-12));
  }
}

TEST_CASE("cosine schedule decays from the base rate to min_lr over the run", "[schedule]") {
  ScheduleSpec s = spec(ScheduleKind::cosine);
  s.min_lr = 0.01;
  SECTION("without warmup") {
    const LrSchedule schedule(s, 0.1, 10, 5);  // 50 steps
    CHECK(schedule.at(0) == Approx(0.1).epsilon(1e-12));
    CHECK(schedule.at(25) == Approx((0.1 + 0.01) / 2).epsilon(1e-12));  // halfway
    // A quarter of the way: min + (base-min) * (1 + cos(pi/4)) / 2.
    CHECK(schedule.at(12) ==
          Approx(0.01 + 0.09 * 0.5 * (1 + std::cos(3.141592653589793 * 12 / 50))).epsilon(1e-12));
    CHECK(schedule.at(50) == Approx(0.01).epsilon(1e-12));   // end of the run
    CHECK(schedule.at(500) == Approx(0.01).epsilon(1e-12));  // clamped, never rises again
    for (std::int64_t step = 1; step <= 50; ++step)
      CHECK(schedule.at(step) < schedule.at(step - 1));
  }
  SECTION("after a warmup, the decay spans the remaining steps") {
    s.warmup_epochs = 1.0;
    const LrSchedule schedule(s, 0.1, 10, 5);  // warmup 10 steps, cosine over 40
    CHECK(schedule.at(4) == Approx(0.1 * 5 / 10).epsilon(1e-12));
    CHECK(schedule.at(9) == Approx(0.1).epsilon(1e-12));
    CHECK(schedule.at(10) == Approx(0.1).epsilon(1e-12));
    CHECK(schedule.at(30) == Approx((0.1 + 0.01) / 2).epsilon(1e-12));
    CHECK(schedule.at(50) == Approx(0.01).epsilon(1e-12));
  }
}
