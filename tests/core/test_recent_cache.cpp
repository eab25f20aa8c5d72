// RecentCache: each key's value made once while it stays among the most recently used, the least
// recently used one dropped when full.
#include <catch2/catch.hpp>

#include <memory>

#include "core/recent_cache.hpp"

TEST_CASE("a recent cache makes each key's value once and drops the least recently used",
          "[cache]") {
  strata::RecentCache<int, int, 2> cache;
  int made = 0;
  const auto make = [&](int value) {
    return [&made, value] {
      ++made;
      return std::make_unique<int>(value);
    };
  };
  CHECK(cache.newest() == nullptr);
  int& first = cache.get(1, make(10));
  CHECK(cache.get(2, make(20)) == 20);
  CHECK(cache.get(1, make(11)) == 10);  // kept: made once
  CHECK(&cache.get(1, make(12)) == &first);
  CHECK(made == 2);
  CHECK(cache.get(3, make(30)) == 30);  // full: 2, used least recently, goes
  CHECK(made == 3);
  CHECK(cache.get(1, make(13)) == 10);
  CHECK(cache.get(2, make(21)) == 21);  // made again
  CHECK(made == 4);
  CHECK(*cache.newest() == 21);
  cache.clear();
  CHECK(cache.newest() == nullptr);
}
