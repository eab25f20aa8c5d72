#include "core/lr_schedule.hpp"

#include <algorithm>
#include <cmath>
#include <numbers>

namespace strata {

LrSchedule::LrSchedule(const ScheduleSpec& spec, double base_lr, std::int64_t steps_per_epoch,
                       int epochs)
    : spec_(spec),
      base_lr_(base_lr),
      steps_per_epoch_(static_cast<double>(std::max<std::int64_t>(steps_per_epoch, 1))),
      warmup_steps_(spec.warmup_epochs * steps_per_epoch_),
      total_steps_(static_cast<double>(epochs) * steps_per_epoch_) {}

double LrSchedule::at(std::int64_t step) const {
  const double s = static_cast<double>(step);
  if (s < warmup_steps_) return base_lr_ * (s + 1.0) / warmup_steps_;
  const double after = s - warmup_steps_;
  switch (spec_.kind) {
    case ScheduleKind::constant:
      return base_lr_;
    case ScheduleKind::step: {
      const double drops = std::floor(after / (spec_.step_epochs * steps_per_epoch_));
      return base_lr_ * std::pow(spec_.gamma, drops);
    }
    case ScheduleKind::cosine: {
      const double span = std::max(total_steps_ - warmup_steps_, 1.0);
      const double progress = std::min(after / span, 1.0);
      return spec_.min_lr +
             (base_lr_ - spec_.min_lr) * 0.5 * (1.0 + std::cos(std::numbers::pi * progress));
    }
  }
  return base_lr_;
}

}  // namespace strata
