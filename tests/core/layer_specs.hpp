// A layer spec built in code, for tests that make models without YAML.
#pragma once

#include <string>

#include "core/config.hpp"

namespace strata::testing {

inline LayerSpec layer(LayerKind kind, const std::string& name, int units = 0) {
  LayerSpec s;
  s.kind = kind;
  s.name = name;
  s.units = units;
  return s;
}

}  // namespace strata::testing
