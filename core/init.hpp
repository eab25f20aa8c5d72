// Weight initialisers: He, Glorot and zeros.
#pragma once

#include "core/config.hpp"
#include "core/rng.hpp"
#include "core/tensor.hpp"

namespace strata {

// fan_in / fan_out count the inputs and outputs that feed one weight (for conv: channels x kernel area).
void initialize_weights(Tensor& weights, InitKind kind, std::int64_t fan_in, std::int64_t fan_out, Rng& rng);

}  // namespace strata
