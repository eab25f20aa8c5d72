// The nested communicators follow world_rank = m + M*d + M*D*g on the real world of 2 or 4 ranks.
#include <catch2/catch.hpp>

#include <vector>

#include "parallel/topology.hpp"

using namespace strata;

namespace {

Plan plan_for(int world_size, int model, int data) {
  PlanRequest r;
  r.world_size = world_size;
  r.local_batch = 8;
  r.max_global_batch = 8 * data;
  r.fixed_model = model;
  r.fixed_data = data;
  return make_plan(r);
}

// The world ranks of a communicator's members, in its rank order.
std::vector<float> members_of(const Communicator& c, int world_rank) {
  std::vector<float> all(static_cast<std::size_t>(c.size()));
  const float mine = static_cast<float>(world_rank);
  c.allgather(std::span(&mine, 1), all);
  return all;
}

}  // namespace

TEST_CASE("communicators follow the layout formula", "[mpi][topology]") {
  const Communicator world = Communicator::world();
  const int n = world.size();
  for (auto [model, data] :
       std::vector<std::pair<int, int>>{{1, 1}, {1, n}, {n, 1}, {2, n / 2}, {1, 2}}) {
    if (model * data > n || n % (model * data) != 0) continue;
    const Plan plan = plan_for(n, model, data);
    const Topology t(world, plan);
    const auto [g, d, m] = t.coords();
    INFO("M=" << model << " D=" << data << " rank " << world.rank());
    REQUIRE(world.rank() == m + model * d + model * data * g);
    CHECK(t.member().size() == data * model);
    CHECK(t.member().rank() == d * model + m);
    CHECK(t.data().size() == data);
    CHECK(t.data().rank() == d);
    CHECK(t.model().size() == model);
    CHECK(t.model().rank() == m);
    CHECK(t.peers().size() == plan.groups);
    CHECK(t.peers().rank() == g);
    // Who is in each communicator, by world rank.
    const auto data_members = members_of(t.data(), world.rank());
    for (int i = 0; i < data; ++i)
      CHECK(data_members[static_cast<std::size_t>(i)] ==
            static_cast<float>(plan.world_rank({g, i, m})));
    const auto model_members = members_of(t.model(), world.rank());
    for (int i = 0; i < model; ++i)
      CHECK(model_members[static_cast<std::size_t>(i)] ==
            static_cast<float>(plan.world_rank({g, d, i})));
    const auto peer_members = members_of(t.peers(), world.rank());
    for (int i = 0; i < plan.groups; ++i)
      CHECK(peer_members[static_cast<std::size_t>(i)] ==
            static_cast<float>(plan.world_rank({i, d, m})));
  }
}

TEST_CASE("a plan for another world size is refused on every rank before any split",
          "[mpi][topology]") {
  const Communicator world = Communicator::world();
  const Plan plan = plan_for(world.size() * 2, 1, 1);
  CHECK_THROWS_AS(Topology(world, plan), std::invalid_argument);
  world.barrier();  // every rank got here: nobody is left inside a split
}

TEST_CASE("all ranks of this machine share one node", "[mpi][topology]") {
  const Communicator world = Communicator::world();
  CHECK(measure_ranks_per_node(world) == world.size());
}
