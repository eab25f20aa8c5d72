#include "core/init.hpp"

#include <cmath>

namespace strata {

void initialize_weights(Tensor& weights, InitKind kind, std::int64_t fan_in, std::int64_t fan_out,
                        Rng& rng) {
  switch (kind) {
    case InitKind::zeros:
      weights.fill(0.0f);
      return;
    case InitKind::he: {
      // He et al.: keeps activation variance through ReLUs.
      const float std = std::sqrt(2.0f / static_cast<float>(fan_in));
      for (auto& w : weights.values()) w = std * rng.normal();
      return;
    }
    case InitKind::uniform_fan_in: {
      const float limit = 1.0f / std::sqrt(static_cast<float>(fan_in));
      for (auto& w : weights.values()) w = rng.uniform(-limit, limit);
      return;
    }
    case InitKind::glorot: {
      const float limit = std::sqrt(6.0f / static_cast<float>(fan_in + fan_out));
      for (auto& w : weights.values()) w = rng.uniform(-limit, limit);
      return;
    }
  }
}

void initialize_bias(Tensor& bias, InitKind kind, std::int64_t fan_in, Rng& rng) {
  if (kind == InitKind::uniform_fan_in)
    initialize_weights(bias, kind, fan_in, 0, rng);
  else
    bias.fill(0.0f);
}

}  // namespace strata
