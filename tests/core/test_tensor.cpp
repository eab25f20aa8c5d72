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

TEST_CASE("layouts convert into each other, element by element", "[tensor][layout]") {
  Tensor plain({2, 16, 2, 3});
  for (std::int64_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<float>(i);
  Tensor eight, sixteen, from_sixteen, back;
  convert_layout(plain, eight, Layout::channel_blocked8);
  // Sample 0, pixel 0: channels 0..7 side by side (plain offsets 0, 6, 12, ...), then pixel 1.
  CHECK(eight[1] == 6.0f);
  CHECK(eight[8] == 1.0f);
  // Channel 8 starts the second block, after the first block's 6 pixels.
  CHECK(eight[48] == 48.0f);
  convert_layout(eight, sixteen, Layout::channel_blocked16);
  CHECK(sixteen.layout() == Layout::channel_blocked16);
  CHECK(sixteen[8] == 48.0f);  // channel 8 of pixel 0 sits next to channels 0..7
  CHECK(sixteen[16] == 1.0f);
  convert_layout(sixteen, from_sixteen, Layout::channel_blocked8);
  CHECK(from_sixteen.values().size() == eight.values().size());
  for (std::int64_t i = 0; i < eight.size(); ++i) CHECK(from_sixteen[i] == eight[i]);
  convert_layout(from_sixteen, back, Layout::plain);
  for (std::int64_t i = 0; i < plain.size(); ++i) CHECK(back[i] == plain[i]);
  // Straight between plain and 16-channel blocks, as through 8-channel ones.
  Tensor direct_sixteen, direct_back;
  convert_layout(plain, direct_sixteen, Layout::channel_blocked16);
  for (std::int64_t i = 0; i < sixteen.size(); ++i) CHECK(direct_sixteen[i] == sixteen[i]);
  convert_layout(sixteen, direct_back, Layout::plain);
  for (std::int64_t i = 0; i < plain.size(); ++i) CHECK(direct_back[i] == plain[i]);
  CHECK(channel_block(Layout::plain) == 1);
  Tensor twelve;
  CHECK_THROWS_AS(twelve.resize({1, 12, 2, 2}, Layout::channel_blocked8), std::invalid_argument);
  CHECK_NOTHROW(twelve.resize({1, 24, 2, 2}, Layout::channel_blocked8));
  CHECK_THROWS_AS(twelve.resize({1, 24, 2, 2}, Layout::channel_blocked16), std::invalid_argument);
}
