// Hierarchical classification's pure parts: every class under exactly one super-class, routing
// that sends each sample to the sub-classifier of its most probable super-class, and a flat model
// widened to a parameter count.
#include <catch2/catch.hpp>

#include "tests/core/layer_specs.hpp"
#include "transfer/hierarchy.hpp"

using namespace strata;
using Catch::Matchers::Contains;

namespace {

// Fashion-MNIST's: tops {0,2,3,4,6}, footwear {5,7,9}, other {1,8}.
Hierarchy fashion() {
  return {{"tops", "footwear", "other"}, {{0, 2, 3, 4, 6}, {5, 7, 9}, {1, 8}}};
}

Predictions rows(int classes, std::vector<std::vector<float>> values) {
  Predictions p{classes, {}};
  for (const auto& row : values)
    p.probabilities.insert(p.probabilities.end(), row.begin(), row.end());
  return p;
}

}  // namespace

TEST_CASE("every class has one super-class", "[transfer][hierarchy]") {
  const auto of = fashion().super_of(10);
  CHECK(of == std::vector<int>{0, 2, 0, 0, 0, 1, 0, 1, 2, 1});
  Hierarchy twice{{"a", "b"}, {{0, 1}, {1, 2}}};
  CHECK_THROWS_WITH(twice.super_of(3), Contains("class 1 is in super-classes a and b"));
  Hierarchy gap{{"a", "b"}, {{0}, {2}}};
  CHECK_THROWS_WITH(gap.super_of(3), Contains("class 1 is in no super-class"));
  CHECK_THROWS_WITH(fashion().super_of(9), Contains("class 9 is not below the data's 9 classes"));
}

TEST_CASE("routing sends each sample to its super-class's sub-classifier",
          "[transfer][hierarchy]") {
  const Hierarchy h = fashion();
  // Four samples: coarse says tops, footwear, other, footwear.
  const Predictions coarse =
      rows(3, {{0.7f, 0.2f, 0.1f}, {0.1f, 0.8f, 0.1f}, {0.2f, 0.3f, 0.5f}, {0.4f, 0.45f, 0.15f}});
  // Each sub-classifier prefers a different position for each sample, so a sample routed to the
  // wrong one would come out as another class.
  std::vector<std::optional<Predictions>> subs(3);
  subs[0] = rows(5, {{0, 0, 0.9f, 0.1f, 0}, {1, 0, 0, 0, 0}, {1, 0, 0, 0, 0}, {0, 0, 0, 0, 1}});
  subs[1] = rows(3, {{1, 0, 0}, {0, 0.2f, 0.8f}, {1, 0, 0}, {0, 1, 0}});
  subs[2] = rows(2, {{1, 0}, {1, 0}, {0.3f, 0.7f}, {1, 0}});
  // tops[2] = 3, footwear[2] = 9, other[1] = 8, footwear[1] = 7.
  CHECK(route(h, coarse, subs) == std::vector<int>{3, 9, 8, 7});
  // A super-class of one class needs no sub-classifier.
  const Hierarchy single{{"one", "rest"}, {{4}, {0, 1, 2, 3}}};
  std::vector<std::optional<Predictions>> only_rest(2);
  only_rest[1] = rows(4, {{0, 0, 1, 0}, {0, 1, 0, 0}});
  CHECK(route(single, rows(2, {{0.9f, 0.1f}, {0.2f, 0.8f}}), only_rest) == std::vector<int>{4, 1});
}

TEST_CASE("a flat model is widened to a parameter count", "[transfer][hierarchy]") {
  using strata::testing::layer;
  const std::vector<LayerSpec> layers{
      layer(LayerKind::flatten, "flatten", 0), layer(LayerKind::dense, "hidden", 32),
      layer(LayerKind::relu, "relu", 0), layer(LayerKind::dense, "out", 10)};
  const Shape input{1, 8, 8};
  const std::int64_t base = parameter_count(layers, input, 10);
  CHECK(base == 64 * 32 + 32 + 32 * 10 + 10);
  const auto wide = widen_to(layers, input, 10, 3 * base);
  const std::int64_t got = parameter_count(wide, input, 10);
  // One unit more or less moves the count by 64 + 1 + 10 + 1 = 75 parameters.
  CHECK(std::llabs(got - 3 * base) <= 38);
  CHECK(wide[3].units == 10);  // the output layer keeps its size
  CHECK(wide[1].units > 90);
}
