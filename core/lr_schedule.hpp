// Learning-rate schedules: constant, step and cosine, each after an optional linear warmup.
#pragma once

#include <cstdint>

#include "core/config.hpp"

namespace strata {

class LrSchedule {
 public:
  LrSchedule(const ScheduleSpec& spec, double base_lr, std::int64_t steps_per_epoch, int epochs);
  // The learning rate for optimizer step `step` (0-based, counted over the whole run).
  double at(std::int64_t step) const;

 private:
  ScheduleSpec spec_;
  double base_lr_;
  double steps_per_epoch_;
  double warmup_steps_;
  double total_steps_;
};

}  // namespace strata
