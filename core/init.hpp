// Weight initialisers: He, Glorot, zeros, and PyTorch's default uniform by fan-in.
#pragma once

#include "core/config.hpp"
#include "core/rng.hpp"
#include "core/tensor.hpp"

namespace strata {

// fan_in / fan_out count the inputs and outputs that feed one weight (for conv: channels x kernel
// area).
void initialize_weights(Tensor& weights, InitKind kind, std::int64_t fan_in, std::int64_t fan_out,
                        Rng& rng);
// Biases start at zero except for uniform_fan_in, which draws them like the weights.
void initialize_bias(Tensor& bias, InitKind kind, std::int64_t fan_in, Rng& rng);

}  // namespace strata
