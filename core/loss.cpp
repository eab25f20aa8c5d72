#include "core/loss.hpp"

#include <algorithm>
#include <cmath>

namespace strata {

double softmax_cross_entropy(const Tensor& logits, std::span<const std::int32_t> labels,
                             Tensor& grad, double grad_scale) {
  const std::int64_t batch = logits.dim(0), classes = logits.dim(1);
  grad.resize(logits.shape());
  const double scale = grad_scale > 0.0 ? grad_scale : static_cast<double>(batch);
  const float inv = static_cast<float>(1.0 / scale);
  double total = 0.0;
  for (std::int64_t b = 0; b < batch; ++b) {
    const float* z = logits.data() + b * classes;
    float* g = grad.data() + b * classes;
    // Subtracting the max keeps exp() finite; log-sum-exp in double keeps the loss exact enough.
    const float zmax = *std::max_element(z, z + classes);
    double sum = 0.0;
    for (std::int64_t c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(z[c] - zmax));
    const double log_sum = std::log(sum);
    const auto label = labels[static_cast<std::size_t>(b)];
    total += log_sum - static_cast<double>(z[label] - zmax);
    for (std::int64_t c = 0; c < classes; ++c) {
      const double p = std::exp(static_cast<double>(z[c] - zmax) - log_sum);
      g[c] = static_cast<float>(p - (c == label ? 1.0 : 0.0)) * inv;
    }
  }
  return total / static_cast<double>(batch);
}

std::int64_t count_correct(const Tensor& logits, std::span<const std::int32_t> labels) {
  const std::int64_t batch = logits.dim(0), classes = logits.dim(1);
  std::int64_t correct = 0;
  for (std::int64_t b = 0; b < batch; ++b) {
    const float* z = logits.data() + b * classes;
    const auto best = std::max_element(z, z + classes) - z;
    if (best == labels[static_cast<std::size_t>(b)]) ++correct;
  }
  return correct;
}

}  // namespace strata
