// The bounded-batch planner: its choices, its bound, its layout formula and its error messages.
#include <fmt/format.h>
#include <catch2/catch.hpp>

#include "core/errors.hpp"
#include "parallel/planner.hpp"

using namespace strata;

namespace {

PlanRequest request(int ranks, int local_batch, int bound) {
  PlanRequest r;
  r.world_size = ranks;
  r.local_batch = local_batch;
  r.max_global_batch = bound;
  return r;
}

std::string error_of(const PlanRequest& r) {
  try {
    make_plan(r);
  } catch (const ConfigError& e) {
    return e.what();
  }
  FAIL("no ConfigError for " << r.world_size << " ranks");
  return {};
}

}  // namespace

TEST_CASE("extra ranks become member groups, not a larger batch", "[planner]") {
  const Plan p = make_plan(request(8, 64, 128));
  CHECK(p.model == 1);
  CHECK(p.data == 2);
  CHECK(p.groups == 4);
  CHECK(p.global_batch() == 128);

  const Plan odd = make_plan(request(6, 64, 256));  // D=4 would fit the bound but does not divide 6
  CHECK(odd.data == 3);
  CHECK(odd.groups == 2);

  const Plan prime = make_plan(request(7, 64, 256));
  CHECK(prime.data == 1);
  CHECK(prime.groups == 7);

  const Plan no_bound =
      make_plan(request(4, 32, 0));  // no bound given: the local batch is the bound
  CHECK(no_bound.data == 1);
  CHECK(no_bound.groups == 4);
}

TEST_CASE("fixed M and D are honoured", "[planner]") {
  PlanRequest r = request(8, 64, 256);
  r.fixed_model = 2;
  Plan p = make_plan(r);
  CHECK(p.model == 2);
  CHECK(p.data == 4);
  CHECK(p.groups == 1);
  r.fixed_data = 2;
  p = make_plan(r);
  CHECK(p.data == 2);
  CHECK(p.groups == 2);
}

TEST_CASE("M is the smallest divisor at which a shard fits the memory limit", "[planner]") {
  PlanRequest r = request(8, 64, 64);
  r.model_bytes = 100 << 20;
  r.split_bytes = 100 << 20;
  r.memory_per_rank_bytes = 30 << 20;
  Plan p = make_plan(r);
  CHECK(p.model == 4);  // 100/2 = 50 MiB does not fit 30, 100/4 = 25 does
  CHECK(p.groups == 2);
  // Only split layers shrink: with 20 MiB whole on every shard, 20 + 80/8 = 30 fits, 20 + 80/4
  // = 40 does not.
  r.split_bytes = 80 << 20;
  p = make_plan(r);
  CHECK(p.model == 8);
  r.memory_per_rank_bytes = 10 << 20;
  r.split_bytes = 100 << 20;
  CHECK_THAT(
      error_of(r),
      Catch::Contains(
          "the model needs 100.0 MiB, which does not fit 10.0 MiB per rank even split 8 ways"));
  r.memory_per_rank_bytes = 50 << 20;
  r.split_bytes = 0;  // nothing marked split: no M helps
  CHECK_THAT(error_of(r), Catch::Contains("100.0 MiB of it is in layers not marked `split`"));
}

TEST_CASE("the global batch never exceeds the bound, and G x D x M = N, for N from 1 to 4096",
          "[planner]") {
  int plans = 0;
  for (int n = 1; n <= 4096; ++n)
    for (int b : {1, 32, 64, 100})
      for (int bound_factor : {1, 2, 3, 8, 64})
        for (int m : {0, 1, 2, 4}) {
          PlanRequest r = request(n, b, b * bound_factor);
          r.fixed_model = m;
          r.accumulate = (n + b) % 2;  // auto and 1 alike over the sweep
          if (m > 0 && n % m != 0) continue;
          const Plan p = make_plan(r);
          ++plans;
          REQUIRE(p.global_batch() <= r.max_global_batch);
          REQUIRE(p.groups * p.data * p.model == n);
          // D is maximal: the next D that divides N would break the bound.
          for (int d = p.data + 1; d * p.model <= n; ++d)
            if (n % (d * p.model) == 0) REQUIRE(d * b > r.max_global_batch);
        }
  CHECK(plans > 200000);
}

TEST_CASE("accumulation keeps the global batch at the bound when D is smaller", "[planner]") {
  PlanRequest r = request(2, 64, 256);
  r.accumulate = 0;  // auto
  Plan p = make_plan(r);
  CHECK(p.data == 2);
  CHECK(p.accumulate == 2);
  CHECK(p.global_batch() == 256);
  CHECK_THAT(describe(p),
             Catch::Contains("global batch 256 (bound 256) per group in K = 2 micro-batches"));
  r.world_size = 8;
  p = make_plan(r);
  CHECK(p.data == 4);
  CHECK(p.accumulate == 1);
  CHECK(p.groups == 2);

  r = request(8, 32, 128);
  r.accumulate = 2;  // fixed: D shrinks so that K x D x b stays within the bound
  p = make_plan(r);
  CHECK(p.data == 2);
  CHECK(p.groups == 4);
  CHECK(p.global_batch() == 128);
  r.accumulate = 5;
  CHECK(error_of(r) ==
        "parallel.accumulate: 5 micro-batches x local batch 32 = 160, above "
        "parallel.max_global_batch 128");
}

TEST_CASE("the rank layout is world_rank = m + M*d + M*D*g", "[planner]") {
  PlanRequest r = request(24, 16, 48);
  r.fixed_model = 2;
  r.ranks_per_node = 4;
  const Plan p = make_plan(r);
  REQUIRE(p.model == 2);
  REQUIRE(p.data == 3);
  REQUIRE(p.groups == 4);
  for (int rank = 0; rank < 24; ++rank) {
    const RankCoords c = p.coords(rank);
    CHECK(rank == c.model + 2 * c.data + 6 * c.group);
    CHECK(p.world_rank(c) == rank);
  }
  CHECK(p.coords(13).group == 2);
  CHECK(p.coords(13).data == 0);
  CHECK(p.coords(13).model == 1);
  CHECK(p.model_groups_within_nodes());
  r.ranks_per_node = 3;
  CHECK_FALSE(make_plan(r).model_groups_within_nodes());
  CHECK_THAT(describe(make_plan(r)), Catch::Contains("some replicas' model shards span two nodes"));
}

TEST_CASE("impossible requests name the numbers", "[planner]") {
  CHECK(error_of(request(4, 128, 64)) ==
        "parallel.max_global_batch: 64 is smaller than training.local_batch 128; one replica alone "
        "exceeds the bound");
  PlanRequest r = request(6, 32, 256);
  r.fixed_model = 4;
  CHECK(error_of(r) ==
        "parallel.model: 6 ranks cannot be split into model groups of 4 shards (6 is not a "
        "multiple of 4); the nearest rank counts that work are 4 and 8");
  r = request(3, 32, 256);
  r.fixed_model = 4;
  CHECK(error_of(r).ends_with("; the nearest rank count that works is 4"));
  r = request(6, 32, 256);
  r.fixed_data = 4;
  CHECK(error_of(r) ==
        "parallel.data: 6 ranks cannot be split into groups of D x M = 4 x 1 = 4 ranks; the "
        "nearest rank counts that work are 4 and 8");
  for (int n : {3, 5, 7}) {
    r = request(n, 32, 256);
    r.fixed_data = 2;
    CHECK(error_of(r).ends_with(
        fmt::format("the nearest rank counts that work are {} and {}", n - 1, n + 1)));
  }
  r = request(8, 32, 64);
  r.fixed_data = 4;
  CHECK(error_of(r) ==
        "parallel.data: 4 replicas x 32 samples per step = global batch 128, above "
        "parallel.max_global_batch 64");
}

TEST_CASE("describe lists the groups and the reasons", "[planner]") {
  PlanRequest r = request(8, 64, 128);
  r.ranks_per_node = 4;
  const std::string text = describe(make_plan(r));
  CHECK_THAT(
      text,
      Catch::Contains(
          "8 ranks = G 4 member groups x D 2 data replicas x M 1 model shards; global batch 128"));
  CHECK_THAT(text, Catch::Contains("D = 2: the largest D with D x 64 <= 128"));
  CHECK_THAT(text, Catch::Contains("group 3: ranks 6-7 on node 1"));
}

TEST_CASE("layout data puts every rank into one group, within the bound", "[planner]") {
  PlanRequest r = request(4, 32, 128);
  r.one_group = true;
  Plan p = make_plan(r);
  CHECK(p.groups == 1);
  CHECK(p.data == 4);
  // Without it the same request gives the largest D under the bound, and more groups for more
  // ranks; with it, ranks beyond the bound are an error that says how many fit.
  r = request(8, 32, 128);
  CHECK(make_plan(r).groups == 2);
  r.one_group = true;
  CHECK(error_of(r) ==
        "parallel.layout: data puts every rank into one training: D = 8 ranks / M = 1 = 8 replicas "
        "x 32 samples per step = global batch 256, above parallel.max_global_batch 128 (or raise "
        "max_global_batch, or use layout: members for more trainings); the nearest rank count "
        "that works is 4");
  r = request(8, 32, 512);
  r.one_group = true;
  r.fixed_model = 2;
  p = make_plan(r);
  CHECK(p.groups == 1);
  CHECK(p.data == 4);
  CHECK(p.model == 2);
  r.fixed_data = 2;
  CHECK(
      error_of(r) ==
      "parallel.layout: data puts every rank into one training, but parallel.data fixes D x M = 2 "
      "x 2 = 4 ranks, not 8 (or leave parallel.data out); the nearest rank count that works is "
      "4");
  // With both D and M fixed the suggestions honour both: 6 ranks of groups of 2 x 4 = 8.
  r = request(6, 32, 512);
  r.fixed_model = 4;
  r.fixed_data = 2;
  CHECK(error_of(r).ends_with("; the nearest rank count that works is 8"));
}
