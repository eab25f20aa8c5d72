// A tensor bound to storage it does not own (a shared-memory window): it keeps its values, works
// on that storage, keeps its size, and copies of it own their values.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <vector>

#include "core/tensor.hpp"

using namespace strata;

TEST_CASE("a bound tensor works on the storage it was bound to", "[tensor]") {
  Tensor t({2, 3}, std::vector<float>{1, 2, 3, 4, 5, 6});
  std::vector<float> window(6, -1.0f);
  REQUIRE(!t.bound());
  t.bind(window);
  CHECK(t.bound());
  CHECK(window == std::vector<float>{1, 2, 3, 4, 5, 6});  // its values moved there
  CHECK(t.data() == window.data());
  t[4] = 50.0f;
  CHECK(window[4] == 50.0f);
  window[0] = 10.0f;
  CHECK(t[0] == 10.0f);
  // Same count: fine, and still bound; another count would leave the window.
  t.resize({3, 2});
  CHECK(t.data() == window.data());
  CHECK_THROWS_AS(t.resize({4, 2}), std::logic_error);
  // A copy owns its values; assigning into the bound tensor writes the window.
  Tensor copy = t;
  CHECK(!copy.bound());
  CHECK(copy.data() != window.data());
  copy[1] = 7.0f;
  CHECK(window[1] == 2.0f);
  t = copy;
  CHECK(window[1] == 7.0f);
  CHECK(t.bound());
  t.fill(0.5f);
  CHECK(window == std::vector<float>(6, 0.5f));
  std::vector<float> small(5);
  Tensor other({6});
  CHECK_THROWS_AS(other.bind(small), std::invalid_argument);
  // A moved tensor takes the binding with it.
  Tensor moved = std::move(t);
  CHECK(moved.bound());
  CHECK(moved.data() == window.data());
}
