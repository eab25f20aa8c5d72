// The hierarchical (shared-memory) gradient sum against MPI_Allreduce: gradients of odd sizes
// (1, 7 and 1 MiB + 3 floats) on 2, 3 and 4 ranks of one node, and on 2 simulated nodes of 2
// ranks; bitwise equal to the sum in node-rank order, then across nodes (the order it fixes), and
// to MPI_Allreduce within 1e-6 (bitwise on 2 ranks, where a + b is the only order). A D = 2
// training on it ends bit-identical to one on MPI's allreduce. A share larger than a chunk goes
// through in chunks on either sum.
#include <catch2/catch.hpp>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/config_names.hpp"
#include "core/trace.hpp"
#include "core/trainer.hpp"
#include "jobs/group_training.hpp"
#include "parallel/hierarchical_sync.hpp"
#include "parallel/planner.hpp"
#include "parallel/topology.hpp"
#include "tests/parallel/trainer_steps.hpp"

using namespace strata;

namespace {

struct Gradients {
  std::vector<Tensor> values, grads;
  std::vector<Param> params;
  explicit Gradients(const std::vector<std::int64_t>& sizes) {
    values.reserve(sizes.size());
    grads.reserve(sizes.size());
    for (auto n : sizes) {
      values.emplace_back(Shape{n});
      grads.emplace_back(Shape{n});
    }
    for (std::size_t k = 0; k < sizes.size(); ++k)
      params.push_back({fmt::format("p{}", k), &values[k], &grads[k]});
  }
  // Rank- and round-dependent values, different in every element.
  void fill(int rank, int round) {
    std::mt19937 engine(static_cast<unsigned>(1000 * round + rank));
    std::uniform_real_distribution<float> draw(-1.0f, 1.0f);
    for (auto& g : grads)
      for (auto& x : g.values()) x = draw(engine);
  }
  std::vector<float> flat() const {
    std::vector<float> out;
    for (const auto& g : grads) out.insert(out.end(), g.values().begin(), g.values().end());
    return out;
  }
};

}  // namespace

TEST_CASE("the hierarchical sum equals MPI_Allreduce on 2, 3 and 4 ranks and on 2 nodes",
          "[mpi][allreduce]") {
  const Communicator world = Communicator::world();
  const std::vector<std::int64_t> sizes{1, 7, (1 << 18) + 3};  // 1 MiB + 3 floats
  struct Case {
    int ranks, per_node;
  };
  for (const Case c : {Case{2, 2}, Case{3, 3}, Case{4, 4}, Case{4, 2}}) {
    if (c.ranks > world.size()) continue;
    const bool in = world.rank() < c.ranks;
    const Communicator data = world.split(in ? 0 : MPI_UNDEFINED, world.rank(), "data");
    if (in) {
      const int r = data.rank();
      const Communicator node = data.split(r / c.per_node, r, "data_node");
      const Communicator across = data.split(r % c.per_node, r / c.per_node, "data_across");
      Gradients mine(sizes);
      HierarchicalSync sync(data, node, across);
      sync.attach(mine.params);
      for (int round = 0; round < 2; ++round) {
        mine.fill(r, round);
        const std::vector<float> before = mine.flat();
        std::vector<float> all(before.size() * static_cast<std::size_t>(c.ranks));
        data.allgather(before, all);
        std::vector<float> reference = before;
        data.allreduce_sum(std::span<float>(reference));
        for (auto it = mine.params.rbegin(); it != mine.params.rend(); ++it)
          sync.gradients_ready(std::span(&*it, 1));
        sync.finish();
        const std::vector<float> after = mine.flat();
        // The order the hierarchical sum fixes: each node in rank order, then the nodes.
        const std::size_t n = before.size();
        std::vector<float> ordered(n, 0.0f);
        for (int first = 0; first < c.ranks; first += c.per_node) {
          std::vector<float> node_sum(all.begin() + static_cast<std::ptrdiff_t>(first * n),
                                      all.begin() + static_cast<std::ptrdiff_t>((first + 1) * n));
          for (int q = first + 1; q < first + c.per_node; ++q)
            for (std::size_t i = 0; i < n; ++i)
              node_sum[i] += all[static_cast<std::size_t>(q) * n + i];
          for (std::size_t i = 0; i < n; ++i) ordered[i] += node_sum[i];
        }
        INFO(c.ranks << " ranks, " << c.per_node << " per node, round " << round);
        CHECK(after == ordered);
        double worst = 0.0;
        for (std::size_t i = 0; i < n; ++i)
          worst = std::max(worst, std::fabs(static_cast<double>(after[i]) - reference[i]) /
                                      std::max(1.0, std::fabs(static_cast<double>(reference[i]))));
        CHECK(worst < 1e-6);
        if (c.ranks == 2) CHECK(after == reference);
        CHECK(after != before);
      }
    }
    world.barrier();
  }
}

TEST_CASE("a D=2 training on the hierarchical sum ends bit-identical to one on MPI's",
          "[mpi][allreduce]") {
  const Communicator world = Communicator::world();
  const Communicator pair = world.split(world.rank() < 2 ? 0 : MPI_UNDEFINED, world.rank(), "pair");
  if (world.rank() < 2) {
    Config config = strata::testing::two_replica_config();
    const TrainingData data = load_training_data(config);
    const Plan plan = strata::testing::two_replica_plan();
    REQUIRE(plan.data == 2);
    const Topology topology(pair, plan);
    std::vector<StateDict> states;
    for (const AllreduceKind kind : {AllreduceKind::mpi, AllreduceKind::hierarchical}) {
      config.parallel.allreduce = kind;
      GroupTraining training(config, data, topology, plan, 1);
      CHECK(training.shared_sync.has_value() == (kind == AllreduceKind::hierarchical));
      strata::testing::train_until(*training.trainer, 6);
      states.push_back(strata::testing::whole_state(*training.trainer, topology));
    }
    for (const auto& [key, t] : states[0].tensors()) {
      INFO(key);
      CHECK(states[1].tensor(key).values == t.values);
    }
  }
  world.barrier();
}

TEST_CASE("one worker per replica takes a share larger than a chunk in chunks, on either sum",
          "[mpi][allreduce]") {
  // A replica's 16 samples go through in chunks of 4 (196 608 floats of pooled output a sample),
  // as without a sync: handing each layer to the sync as backward finishes it would need
  // the whole share in one pass, and the chunks that stay in cache gain more.
  const Communicator world = Communicator::world();
  const Communicator pair = world.split(world.rank() < 2 ? 0 : MPI_UNDEFINED, world.rank(), "pair");
  if (world.rank() < 2) {
    Config config = strata::testing::chunked_config();
    const TrainingData data = load_training_data(config);
    const Plan plan = strata::testing::two_replica_plan();
    const Topology topology(pair, plan);
    for (const AllreduceKind kind : {AllreduceKind::mpi, AllreduceKind::hierarchical}) {
      config.parallel.allreduce = kind;
      GroupTraining training(config, data, topology, plan, 1);
      REQUIRE(training.trainer->chunk_samples() == 4);
      Trace trace;
      training.trainer->set_trace(&trace);
      strata::testing::train_until(*training.trainer, 2);
      training.trainer->set_trace(nullptr);
      int chunk_passes = 0;  // the flatten's: the conv and its pooling run a sample at a time
      std::string events = "[";  // the trace's elements joined into one array
      events += trace.events_json(0, "test");
      events += "]";
      for (const auto& event : nlohmann::json::parse(events))
        if (event.value("name", "") == "forward flatten_3") ++chunk_passes;
      INFO(to_string(kind));
      CHECK(chunk_passes == 2 * 4);  // 2 steps of 4 chunks
    }
  }
  world.barrier();
}
