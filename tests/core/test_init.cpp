// Initialisers draw from the distributions they are named for.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "core/init.hpp"

using namespace strata;

namespace {

struct Moments {
  double mean = 0.0, stddev = 0.0, max_abs = 0.0;
};

Moments moments(const Tensor& t) {
  Moments m;
  for (auto v : t.values()) m.mean += v;
  m.mean /= static_cast<double>(t.size());
  for (auto v : t.values()) {
    m.stddev += (v - m.mean) * (v - m.mean);
    m.max_abs = std::max(m.max_abs, static_cast<double>(std::abs(v)));
  }
  m.stddev = std::sqrt(m.stddev / static_cast<double>(t.size()));
  return m;
}

}  // namespace

TEST_CASE("initialisers have the documented scale", "[init]") {
  Rng rng(3);
  Tensor w({256, 400});
  const std::int64_t fan_in = 400, fan_out = 256;

  initialize_weights(w, InitKind::he, fan_in, fan_out, rng);
  auto m = moments(w);
  CHECK(std::abs(m.mean) < 0.002);
  CHECK(m.stddev == Approx(std::sqrt(2.0 / fan_in)).epsilon(0.02));

  initialize_weights(w, InitKind::glorot, fan_in, fan_out, rng);
  m = moments(w);
  const double glorot_limit = std::sqrt(6.0 / (fan_in + fan_out));
  CHECK(m.max_abs <= glorot_limit);
  CHECK(m.max_abs > 0.99 * glorot_limit);
  CHECK(m.stddev ==
        Approx(glorot_limit / std::sqrt(3.0)).epsilon(0.02));  // uniform: limit / sqrt(3)

  initialize_weights(w, InitKind::uniform_fan_in, fan_in, fan_out, rng);
  m = moments(w);
  CHECK(m.max_abs <= 1.0 / std::sqrt(400.0));
  CHECK(m.stddev == Approx(1.0 / std::sqrt(3.0 * fan_in)).epsilon(0.02));

  initialize_weights(w, InitKind::zeros, fan_in, fan_out, rng);
  CHECK(moments(w).max_abs == 0.0);
}

TEST_CASE("biases start at zero except under uniform_fan_in", "[init]") {
  Rng rng(4);
  Tensor b({512});
  b.fill(7.0f);
  initialize_bias(b, InitKind::he, 100, rng);
  CHECK(moments(b).max_abs == 0.0);
  initialize_bias(b, InitKind::uniform_fan_in, 100, rng);
  const auto m = moments(b);
  CHECK(m.max_abs <= 0.1);
  CHECK(m.max_abs > 0.09);
}
