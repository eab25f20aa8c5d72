// The lane vectors' byte loads and stores: every byte value, at every lane, for 1, 8 and 16 lanes.
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <cstring>

#include "core/channel_lanes.hpp"

namespace {

using strata::lane_count;
using strata::LaneInts;
using strata::Lanes16;
using strata::Lanes8;

// Bytes [first, first + L) through load_lane_bytes widen to the same ints, zero-extended (255 is
// the pooling's "no first maximum", not -1), and store_lane_bytes gives the bytes back and writes
// nothing past them.
template <class V>
void check_bytes(int first) {
  constexpr std::int64_t L = lane_count<V>();
  std::array<std::uint8_t, L + 1> bytes{};
  for (std::int64_t l = 0; l < L; ++l)
    bytes[static_cast<std::size_t>(l)] = static_cast<std::uint8_t>(first + l);
  bytes[L] = 0xAB;
  const LaneInts<V> ints = strata::load_lane_bytes<V>(bytes.data());
  std::array<std::int32_t, L> lanes{};
  std::memcpy(lanes.data(), &ints, sizeof(lanes));
  for (std::int64_t l = 0; l < L; ++l) {
    INFO("lanes " << L << ", lane " << l);
    REQUIRE(lanes[static_cast<std::size_t>(l)] == static_cast<std::uint8_t>(first + l));
  }
  std::array<std::uint8_t, L + 1> back{};
  back[L] = 0xCD;
  strata::store_lane_bytes<V>(back.data(), ints);
  for (std::int64_t l = 0; l < L; ++l)
    REQUIRE(back[static_cast<std::size_t>(l)] == bytes[static_cast<std::size_t>(l)]);
  REQUIRE(back[L] == 0xCD);  // nothing written past the lanes
}

}  // namespace

TEST_CASE("lane bytes load zero-extended and store back, every value at every lane",
          "[layers][lanes]") {
  for (int first = 0; first < 256; ++first) {
    check_bytes<float>(first);
    check_bytes<Lanes8>(first);
    check_bytes<Lanes16>(first);
  }
}
