// Drives a search as a cluster would, its trials in flight finishing in a random order: for the
// searches whose proposals depend on the order results come in.
#pragma once

#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "core/rng.hpp"
#include "hpo/search.hpp"

namespace strata::testing {

// Every trial in flight finishes in an order drawn from `order_seed`, each reported as it
// finishes (a NaN fitness as failed); returns the results in that order. Stops after `results`
// results (0: at the end).
inline std::vector<TrialResult> drive_out_of_order(
    Search& search, std::uint64_t order_seed, const std::function<double(const Trial&)>& fitness,
    int results = 0) {
  Rng order(order_seed);
  std::vector<Trial> in_flight;
  std::vector<TrialResult> read;
  while (!search.done() && (results == 0 || static_cast<int>(read.size()) < results)) {
    for (const Trial& t : search.next_batch()) in_flight.push_back(t);
    REQUIRE_FALSE(in_flight.empty());
    const auto pick = static_cast<std::size_t>(order.uniform_double() * in_flight.size());
    const Trial t = in_flight[pick];
    in_flight.erase(in_flight.begin() + static_cast<std::ptrdiff_t>(pick));
    const double f = fitness(t);
    search.report(t.id, f, std::isnan(f));
    read.push_back({t.id, f});
  }
  return read;
}

}  // namespace strata::testing
