// The integer hashes behind every random stream, constexpr and C++17 so that CUDA kernels (built
// with --expt-relaxed-constexpr) draw exactly the numbers the CPU draws: a dropout mask is the
// same on either device.
#pragma once

#include <cstdint>

namespace strata {

constexpr std::uint64_t mix64(std::uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The first step of derive_seed, from the run seed.
constexpr std::uint64_t seed_key(std::uint64_t seed) {
  return mix64(seed + 0x9e3779b97f4a7c15ULL);
}

// One coordinate more on a derived key.
constexpr std::uint64_t derive_key(std::uint64_t key, std::uint64_t coordinate) {
  return mix64(key ^ mix64(coordinate + 0x632be59bd9b4e019ULL));
}

// The counter-th number of the stream with `key` (counters start at 1).
constexpr std::uint64_t stream_draw(std::uint64_t key, std::uint64_t counter) {
  return mix64(key ^ mix64(counter * 0x9e3779b97f4a7c15ULL));
}

// Uniform in [0, 1) from a draw's top 24 bits, exactly representable as float.
constexpr float uniform24(std::uint64_t draw) {
  return static_cast<float>(draw >> 40) * (1.0f / 16777216.0f);
}

}  // namespace strata
