// The one error a search's settings raise: std::invalid_argument naming the setting, its value and
// the rule it breaks.
#pragma once

#include <stdexcept>

#include <fmt/format.h>

namespace strata {

template <typename Value>
[[noreturn]] void bad_setting(const char* owner, const char* name, Value value, const char* rule) {
  throw std::invalid_argument(fmt::format("{}: {} = {} ({})", owner, name, value, rule));
}

}  // namespace strata
