// Softmax cross-entropy: value, gradient, stability at extreme logits, the grad_scale split,
// accuracy count.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/loss.hpp"
#include "core/rng.hpp"

using namespace strata;

TEST_CASE("softmax cross-entropy matches a hand-computed example", "[loss]") {
  // Row 0: log(e^1 + e^2 + e^3) - 3 = 0.40760596444438013, softmax (0.0900306, 0.2447285,
  // 0.6652410). Row 1: log(e^0.5 + e^-0.5 + e^0) - 0.5 = 0.6802696706417346, softmax (0.5064804,
  // 0.1863237, 0.3071959).
  const Tensor logits({2, 3}, {1.0f, 2.0f, 3.0f, 0.5f, -0.5f, 0.0f});
  const std::vector<std::int32_t> labels{2, 0};
  Tensor grad;
  const double loss = softmax_cross_entropy(logits, labels, grad);
  CHECK(loss == Approx((0.40760596444438013 + 0.6802696706417346) / 2).epsilon(1e-7));
  REQUIRE(grad.shape() == Shape{2, 3});
  // d(mean loss)/dz = (softmax - onehot) / batch
  const double expected[6] = {0.09003057317038046 / 2,      0.24472847105479767 / 2,
                              (0.6652409557748219 - 1) / 2, (0.5064803910556541 - 1) / 2,
                              0.1863237232258476 / 2,       0.30719588571849843 / 2};
  for (int i = 0; i < 6; ++i) {
    INFO("grad[" << i << "]");
    CHECK(grad[i] == Approx(expected[i]).epsilon(1e-6));
  }
}

TEST_CASE("softmax cross-entropy gradient matches central differences", "[loss][gradcheck]") {
  Rng rng(42);
  const std::int64_t batch = 5, classes = 7;
  Tensor logits({batch, classes});
  for (auto& v : logits.values()) v = 2.0f * rng.normal();
  std::vector<std::int32_t> labels;
  for (std::int64_t b = 0; b < batch; ++b)
    labels.push_back(static_cast<std::int32_t>(rng.below(classes)));

  Tensor grad, scratch;
  softmax_cross_entropy(logits, labels, grad);
  const float eps = 1e-2f;
  for (std::int64_t i = 0; i < logits.size(); ++i) {
    const float saved = logits[i];
    logits[i] = saved + eps;
    const double up = softmax_cross_entropy(logits, labels, scratch);
    logits[i] = saved - eps;
    const double down = softmax_cross_entropy(logits, labels, scratch);
    logits[i] = saved;
    // The perturbed logits are floats, so divide by the step actually taken.
    const double step = static_cast<double>(saved + eps) - static_cast<double>(saved - eps);
    INFO("logit " << i);
    CHECK(grad[i] == Approx((up - down) / step).margin(1e-4));
  }
}

TEST_CASE("softmax cross-entropy stays finite for huge logits", "[loss]") {
  // exp(1e4) overflows even in double; a max-subtracted log-sum-exp gives the exact answer.
  const Tensor logits({2, 3}, {1e4f, -1e4f, 0.0f, -1e4f, 1e4f, 1e4f});
  Tensor grad;
  SECTION("true class far below the max: loss is the gap") {
    const std::vector<std::int32_t> labels{1, 0};
    const double loss = softmax_cross_entropy(logits, labels, grad);
    REQUIRE(std::isfinite(loss));
    // Row 0: 1e4 - (-1e4) = 2e4. Row 1: log(2) + 2e4.
    CHECK(loss == Approx((2e4 + 2e4 + std::log(2.0)) / 2).epsilon(1e-12));
  }
  SECTION("true class at the max: loss near zero, gradient the softmax") {
    const std::vector<std::int32_t> labels{0, 2};
    const double loss = softmax_cross_entropy(logits, labels, grad);
    CHECK(loss == Approx(std::log(2.0) / 2).epsilon(1e-12));
    CHECK(grad[0] == Approx(0.0).margin(1e-12));
    CHECK(grad[4] == Approx(0.25).epsilon(1e-6));   // 0.5 / batch
    CHECK(grad[5] == Approx(-0.25).epsilon(1e-6));  // (0.5 - 1) / batch
  }
  for (auto g : grad.values()) CHECK(std::isfinite(g));
}

TEST_CASE("grad_scale divides the gradient instead of the batch size", "[loss]") {
  // A batch of 8 split over workers: each worker's 2 rows must give its share of the 8-sample mean
  // gradient, so that summing the workers' gradients gives the full batch's mean gradient.
  Rng rng(7);
  Tensor logits({2, 4});
  for (auto& v : logits.values()) v = rng.normal();
  const std::vector<std::int32_t> labels{3, 1};
  Tensor local, split;
  const double local_loss = softmax_cross_entropy(logits, labels, local);
  const double split_loss = softmax_cross_entropy(logits, labels, split, 8.0);
  CHECK(split_loss == local_loss);  // the returned value is always the mean over these rows
  for (std::int64_t i = 0; i < logits.size(); ++i)
    CHECK(split[i] == Approx(local[i] * 2.0 / 8.0).epsilon(1e-6));

  // Sum over workers equals the whole batch's gradient.
  Tensor whole_logits({4, 4}), whole_grad, part_grad;
  for (auto& v : whole_logits.values()) v = rng.normal();
  const std::vector<std::int32_t> whole_labels{0, 1, 2, 3};
  softmax_cross_entropy(whole_logits, whole_labels, whole_grad);
  for (int half = 0; half < 2; ++half) {
    Tensor part({2, 4}, std::vector<float>(whole_logits.values().begin() + half * 8,
                                           whole_logits.values().begin() + half * 8 + 8));
    softmax_cross_entropy(part,
                          std::span(whole_labels).subspan(static_cast<std::size_t>(half) * 2, 2),
                          part_grad, 4.0);
    for (int i = 0; i < 8; ++i)
      CHECK(part_grad[i] == Approx(whole_grad[half * 8 + i]).epsilon(1e-6));
  }
}

TEST_CASE("count_correct counts rows whose arg-max is the label", "[loss]") {
  const Tensor logits({4, 3}, {
                                  0.1f, 0.9f, 0.0f,     // arg-max 1
                                  -1.0f, -2.0f, -0.5f,  // arg-max 2 (all negative)
                                  5.0f, 4.0f, 4.9f,     // arg-max 0
                                  0.0f, 0.0f, 1.0f,     // arg-max 2
                              });
  CHECK(count_correct(logits, std::vector<std::int32_t>{1, 2, 0, 2}) == 4);
  CHECK(count_correct(logits, std::vector<std::int32_t>{1, 2, 2, 0}) == 2);
  CHECK(count_correct(logits, std::vector<std::int32_t>{0, 0, 1, 1}) == 0);
}
