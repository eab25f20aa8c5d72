#include "jobs/fault_injection.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "core/errors.hpp"

namespace strata {

namespace {

FaultPlan parse(const char* text) {
  FaultPlan plan;
  if (text == nullptr || *text == '\0') return plan;
  const std::string setting(text);
  const auto equals = setting.find('=');
  const std::string name = setting.substr(0, equals);
  long long value = -1;
  try {
    if (equals == std::string::npos) throw std::invalid_argument("no value");
    value = std::stoll(setting.substr(equals + 1));
  } catch (const std::exception&) {
    throw ConfigError(fmt::format("STRATA_FAULT='{}': expected name=number", setting));
  }
  if (name == "kill_at_step")
    plan.kill_at_step = value;
  else if (name == "stop_at_step")
    plan.stop_at_step = value;
  else if (name == "kill_in_write")
    plan.kill_in_write = static_cast<int>(value);
  else if (name == "kill_before_exploit")
    plan.kill_before_exploit = static_cast<int>(value);
  else if (name == "fail_at_step")
    plan.fail_at_step = value;
  else if (name == "fail_in_build")
    plan.fail_in_build = static_cast<int>(value);
  else if (name == "fail_before_build")
    plan.fail_before_build = static_cast<int>(value);
  else
    throw ConfigError(
        fmt::format("STRATA_FAULT='{}': unknown fault (known: kill_at_step, stop_at_step, "
                    "kill_in_write, kill_before_exploit, fail_at_step, fail_in_build, "
                    "fail_before_build)",
                    setting));
  return plan;
}

}  // namespace

const FaultPlan& FaultPlan::from_environment() {
  static const FaultPlan plan = parse(std::getenv("STRATA_FAULT"));
  return plan;
}

void inject_build_fault(BuildFault when, int world_rank) {
  const FaultPlan& plan = FaultPlan::from_environment();
  const bool in_build = when == BuildFault::in_build;
  const char* name = in_build ? "fail_in_build" : "fail_before_build";
  if ((in_build ? plan.fail_in_build : plan.fail_before_build) == world_rank)
    throw std::runtime_error(fmt::format(
        "injected fault (STRATA_FAULT={}={}) while building a training", name, world_rank));
}

}  // namespace strata
