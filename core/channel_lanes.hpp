// Vectors of one channel block's lanes (8 floats for nChw8c, 16 for nChw16c) as GCC/Clang vector
// extensions, with unaligned loads and stores: what the blocked-layout loops compute with.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__AVX2__)
#include <immintrin.h>
#endif

// Built for a CPU without AVX-512 (STRATA_NATIVE=OFF), GCC warns that a 64-byte vector returned by
// value has another calling convention there. Only strata_core's files include this header (and
// the tests, through its kernel headers), all compiled with the same flags, and no function that
// takes or returns these vectors is declared outside them, so all code that passes them agrees on
// that convention.
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

// L lanes of T as a vector (T itself for one lane): the integers and bytes that go with a V.
template <class T, std::int64_t L>
struct LaneVectorOf {
  // A typedef: GCC ignores the attribute on an alias declaration of a dependent type.
  typedef T type __attribute__((vector_size(L * sizeof(T))));
};
template <class T>
struct LaneVectorOf<T, 1> {
  using type = T;
};
// Integers of the same lane count as V, for lane masks and offsets (vector selects need that).
template <class V>
using LaneInts = typename LaneVectorOf<std::int32_t, lane_count<V>()>::type;
// One byte per lane: a max pooling's first-maximum indices.
template <class V>
using LaneBytes = typename LaneVectorOf<std::uint8_t, lane_count<V>()>::type;

// GCC 12 builds __builtin_convertvector's widening of bytes to ints from one scalar byte at a
// time (some 40 instructions for 16 lanes); the x86 zero-extending load is one.
template <class V>
LaneInts<V> load_lane_bytes(const std::uint8_t* p) {
  if constexpr (lane_count<V>() == 1) {
    return *p;
#if defined(__AVX512F__)
  } else if constexpr (lane_count<V>() == 16) {
    // The zero-masked form: the plain one's _mm512_undefined_epi32 trips GCC 12's
    // -Wmaybe-uninitialized; with all lanes kept it compiles to the same instruction.
    const __m512i wide = _mm512_maskz_cvtepu8_epi32(
        static_cast<__mmask16>(0xFFFF), _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
    LaneInts<V> v;
    std::memcpy(&v, &wide, sizeof(v));
    return v;
#endif
#if defined(__AVX2__)
  } else if constexpr (lane_count<V>() == 8) {
    const __m256i wide = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
    LaneInts<V> v;
    std::memcpy(&v, &wide, sizeof(v));
    return v;
#endif
  } else {
    LaneBytes<V> b;
    std::memcpy(&b, p, sizeof(b));
    return __builtin_convertvector(b, LaneInts<V>);
  }
}

template <class V>
void store_lane_bytes(std::uint8_t* p, LaneInts<V> v) {
  if constexpr (lane_count<V>() == 1) {
    *p = static_cast<std::uint8_t>(v);
  } else {
    const auto b = __builtin_convertvector(v, LaneBytes<V>);
    std::memcpy(p, &b, sizeof(b));
  }
}

}  // namespace strata
