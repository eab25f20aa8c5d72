// Vectors of one channel block's lanes (8 floats for nChw8c, 16 for nChw16c) as GCC/Clang vector
// extensions, with unaligned loads and stores: what the blocked-layout loops compute with.
#pragma once

#include <cstdint>
#include <cstring>

// Built for a CPU without AVX-512 (STRATA_NATIVE=OFF), GCC warns that a 64-byte vector returned by
// value has another calling convention there. Only strata_core's .cpp files include this header,
// all compiled with the same flags, and no function that takes or returns these vectors is
// declared elsewhere, so all code that passes them agrees on that convention.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace strata {

using Lanes8 = float __attribute__((vector_size(32)));
using Lanes16 = float __attribute__((vector_size(64)));

// The floats in one V: 1 for a float, 8 or 16 for the vectors.
template <class V>
constexpr std::int64_t lane_count() {
  return static_cast<std::int64_t>(sizeof(V)) / static_cast<std::int64_t>(sizeof(float));
}

template <class V>
V load_lanes(const float* p) {
  V v;
  std::memcpy(&v, p, sizeof(V));
  return v;
}

template <class V>
void store_lanes(float* p, V v) {
  std::memcpy(p, &v, sizeof(V));
}

}  // namespace strata
