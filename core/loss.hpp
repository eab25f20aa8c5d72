// Softmax cross-entropy over logits [batch, classes] and integer labels.
#pragma once

#include <cstdint>
#include <span>

#include "core/tensor.hpp"

namespace strata {

// Returns the mean loss over the batch and writes d(mean loss)/d(logits) into grad (resized).
// `grad_scale` divides the gradient instead of the batch size, for a batch split across workers.
double softmax_cross_entropy(const Tensor& logits, std::span<const std::int32_t> labels,
                             Tensor& grad, double grad_scale = 0.0);

// Number of rows whose arg-max equals the label.
std::int64_t count_correct(const Tensor& logits, std::span<const std::int32_t> labels);

}  // namespace strata
