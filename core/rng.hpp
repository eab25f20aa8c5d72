// Counter-based random streams: the whole state is (key, counter), so it saves and restores
// exactly.
#pragma once

#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <numbers>

#include "core/stream_hash.hpp"

namespace strata {

// A seed for one purpose, derived from the run seed and the coordinates that name it
// (stage, member, generation, ...), so that streams never overlap by accident.
inline std::uint64_t derive_seed(std::uint64_t seed, std::initializer_list<std::uint64_t> path) {
  std::uint64_t key = seed_key(seed);
  for (auto p : path) key = derive_key(key, p);
  return key;
}

// What each stream of a run is for; every stream is derive_seed(run seed, {purpose, ...}).
enum SeedPurpose : std::uint64_t {
  seed_init = 1,
  seed_split = 2,
  seed_shuffle = 3,
  seed_noise = 4,
  seed_synthetic = 5,
  seed_member = 6,
  seed_trial = 7,
  seed_ensemble = 8,   // an ensemble member's initialisation: {seed_ensemble, stage, member}
  seed_bagging = 9,    // its bootstrap sample: {seed_bagging, stage, member}
  seed_transfer = 10,  // a transfer stage's fresh layers: {seed_transfer, stage}
  // The seed of a train, hpo or pbt stage after the first of its kind: {seed_stage, stage}
  seed_stage = 11,
  // Every stream of a hyperparameter search: derive_seed(run seed, {seed_hpo, HpoStream, ...}).
  seed_hpo = 0x68706f  // "hpo"
};

class Rng {
 public:
  explicit Rng(std::uint64_t key = 0, std::uint64_t counter = 0) : key_(key), counter_(counter) {}

  std::uint64_t next_u64() { return stream_draw(key_, ++counter_); }
  // Uniform in [0, 1) with 24 random bits, exactly representable as float.
  float uniform() { return uniform24(next_u64()); }
  double uniform_double() { return static_cast<double>(next_u64() >> 11) * 0x1.0p-53; }
  float uniform(float lo, float hi) { return lo + (hi - lo) * uniform(); }
  // Uniform integer in [0, n); n must be positive.
  std::uint64_t below(std::uint64_t n) { return next_u64() % n; }
  // Box-Muller without a cached second value, so the state stays (key, counter).
  float normal() {
    double u1 = 1.0 - uniform_double();
    double u2 = uniform_double();
    return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) *
                              std::cos(2.0 * std::numbers::pi * u2));
  }

  std::uint64_t key() const { return key_; }
  std::uint64_t counter() const { return counter_; }

 private:
  std::uint64_t key_;
  std::uint64_t counter_;
};

}  // namespace strata
