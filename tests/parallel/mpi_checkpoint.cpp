// A checkpoint does not depend on the decomposition: written by 4 ranks as D=2 x M=2 (shards
// gathered into whole tensors), it loads on 2 ranks as D=1 x M=2 and on 1 rank with every weight
// and optimizer moment reassembled bitwise, and 5 more steps there stay within 1e-5 of the
// uninterrupted run (summation order differs between decompositions, so not bitwise).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include <fmt/format.h>

#include "core/checkpoint_file.hpp"
#include "core/trainer.hpp"
#include "jobs/group_training.hpp"
#include "parallel/planner.hpp"
#include "parallel/state_gather.hpp"
#include "parallel/step_vote.hpp"
#include "parallel/topology.hpp"
#include "tests/parallel/trainer_steps.hpp"

using namespace strata;
using strata::testing::train_until;

namespace {

const char* const resharded_yaml = R"(run: {name: reshard, seed: 11}
data:
  source: synthetic
  validation_fraction: 0.0
  synthetic: {train: 512, test: 64, classes: 4, channels: 1, height: 10, width: 10}
model:
  layers:
    - conv2d: {filters: 32, kernel: 3, init: glorot, split: column}
    - relu
    - maxpool2d: {size: 2}
    - flatten
    - dense: {units: 24, init: glorot, split: column}
    - tanh
    - dense: {units: 16, init: glorot, split: row}
    - relu
    - dense: {units: 4, init: glorot}
training:
  epochs: 1
  local_batch: 32
  optimizer: {type: adam, lr: 0.01}
parallel: {lr_scaling: none}
)";

Plan plan_for(int ranks, int model) {
  PlanRequest request;
  request.world_size = ranks;
  request.local_batch = 32;
  request.max_global_batch = 64;
  request.fixed_model = model;
  request.accumulate = 0;  // auto: the global batch stays 64 on any number of ranks
  return make_plan(request);
}

double largest_relative_difference(const StateDict& a, const StateDict& b,
                                   const std::string& prefix) {
  double worst = 0.0, scale = 0.0;
  for (const auto& [key, t] : a.tensors()) {
    if (!key.starts_with(prefix)) continue;
    const auto& u = b.tensor(key).values;
    REQUIRE(u.size() == t.values.size());
    for (std::size_t i = 0; i < u.size(); ++i) {
      worst = std::max(worst, static_cast<double>(std::fabs(u[i] - t.values[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(t.values[i])));
    }
  }
  return worst / scale;
}

}  // namespace

TEST_CASE("a D=2 x M=2 checkpoint resumes on M=2 and on one rank", "[mpi][checkpoint]") {
  const Communicator world = Communicator::world();
  if (world.size() != 4) return;  // the written decomposition needs exactly 4 ranks
  const Config config = parse_config(resharded_yaml, "r.yaml");
  const TrainingData data = load_training_data(config);

  const Plan written_plan = plan_for(4, 2);
  REQUIRE(written_plan.data == 2);
  REQUIRE(written_plan.accumulate == 1);
  const Topology written_on(world, written_plan);
  GroupTraining original(config, data, written_on, written_plan, 1);
  train_until(*original.trainer, 3);
  const StateDict saved = strata::testing::whole_state(*original.trainer, written_on);
  std::string path;
  if (world.rank() == 0) {
    path = fmt::format("/tmp/strata-mpi-reshard-{}.h5", ::getpid());
    write_checkpoint(path, saved);
  }
  world.broadcast_string(path, 0);
  train_until(*original.trainer, 8);
  const StateDict uninterrupted = strata::testing::whole_state(*original.trainer, written_on);

  for (const int ranks : {2, 1}) {
    const Communicator sub =
        world.split(world.rank() < ranks ? 0 : MPI_UNDEFINED, world.rank(), "sub");
    if (world.rank() < ranks) {
      const Plan plan = plan_for(ranks, ranks == 2 ? 2 : 1);
      REQUIRE(plan.data == 1);
      REQUIRE(plan.accumulate == 2);
      const Topology topology(sub, plan);
      GroupTraining resumed(config, data, topology, plan, 1);
      const StateDict before = strata::testing::whole_state(*resumed.trainer, topology);
      REQUIRE(before.tensor("weights/dense_4/weight").values !=
              saved.tensor("weights/dense_4/weight").values);
      resumed.trainer->load_state(read_checkpoint(path));
      const StateDict loaded = strata::testing::whole_state(*resumed.trainer, topology);
      INFO("resumed on " << ranks << " rank(s)");
      for (const auto& [key, t] : saved.tensors()) {
        INFO(key);
        CHECK(loaded.tensor(key).values == t.values);  // bitwise, weights and Adam's moments
      }
      CHECK(loaded.get_int("optimizer/steps") == 3);
      CHECK(loaded.get_int("trainer/global_step") == 3);
      train_until(*resumed.trainer, 8);
      const StateDict after = strata::testing::whole_state(*resumed.trainer, topology);
      const double weights = largest_relative_difference(uninterrupted, after, "weights/");
      WARN("resumed on " << ranks
                         << " rank(s): after 5 more steps the weights differ from the "
                            "uninterrupted D=2 x M=2 run by "
                         << weights << " of the largest");
      CHECK(weights < 1e-5);
    }
    world.barrier();
  }
  if (world.rank() == 0) std::filesystem::remove(path);
}

TEST_CASE("gather_whole_state assembles row and column slices", "[mpi][checkpoint]") {
  const Communicator world = Communicator::world();
  // Rank r holds rows [r, r+1) of a [size, 3] tensor and columns [r, r+1) of a [2, size] one.
  StateDict local;
  const int n = world.size(), r = world.rank();
  local.put_tensor("rows", std::vector<float>{10.0f * r, 10.0f * r + 1, 10.0f * r + 2}, {1, 3},
                   ShardSpec{{n, 3}, 0, r});
  local.put_tensor("columns", std::vector<float>{1.0f * r, 100.0f + r}, {2, 1},
                   ShardSpec{{2, n}, 1, r});
  local.put_int("steps", 7);
  const StateDict whole = gather_whole_state(local, world);
  std::vector<float> rows, columns(static_cast<std::size_t>(2 * n));
  for (int k = 0; k < n; ++k) rows.insert(rows.end(), {10.0f * k, 10.0f * k + 1, 10.0f * k + 2});
  for (int k = 0; k < n; ++k) {
    columns[static_cast<std::size_t>(k)] = 1.0f * k;
    columns[static_cast<std::size_t>(n + k)] = 100.0f + k;
  }
  CHECK(whole.tensor("rows").values == rows);
  CHECK(whole.tensor("columns").values == columns);
  CHECK(whole.tensor("columns").shard.axis == -1);
  CHECK(whole.get_int("steps") == 7);

  // To the writing shard only, twice into the same buffers: the root gets the same whole tensors,
  // the others nothing.
  StateDict at_root;
  std::vector<float> scratch;
  const float* first_pass = nullptr;
  for (int pass = 0; pass < 2; ++pass) {
    gather_whole_state_to_root(local, world, at_root, scratch);
    if (r != 0) {
      CHECK(at_root.tensors().empty());
      CHECK(at_root.scalars().empty());
      CHECK(scratch.empty());
      continue;
    }
    // The columns come through one slice of scratch (2 floats), never a whole tensor's worth.
    CHECK(scratch.size() <= 2);
    if (pass == 0) first_pass = at_root.tensor("columns").values.data();
    CHECK(at_root.tensor("columns").values.data() == first_pass);
    CHECK(at_root.tensor("rows").values == rows);
    CHECK(at_root.tensor("columns").values == columns);
    CHECK(at_root.tensor("columns").local_shape == std::vector<std::int64_t>{2, n});
    CHECK(at_root.tensor("rows").shard.axis == -1);
    CHECK(at_root.get_int("steps") == 7);
  }
}

TEST_CASE("a step vote gives every rank the same flags one step later", "[mpi][checkpoint]") {
  const Communicator world = Communicator::world();
  StepVote vote(world);
  std::vector<unsigned> seen;
  // Rank 1 raises flag 2 at call 3 only; rank 0 raises flag 1 at call 5 only.
  for (int call = 0; call < 8; ++call) {
    unsigned mine = 0;
    if (world.rank() == 1 && call == 3) mine |= 2u;
    if (world.rank() == 0 && call == 5) mine |= 1u;
    seen.push_back(vote.exchange(mine));
  }
  CHECK(seen == std::vector<unsigned>{0, 0, 0, 0, 2, 0, 1, 0});
}
