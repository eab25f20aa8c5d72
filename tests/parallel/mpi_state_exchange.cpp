// PBT's exploit: a member group's training state sent point to point over the peers communicator,
// shard by shard, arrives bit for bit in another group (M = 1 on 2 ranks, M = 1 and M = 2 on 4),
// keeping the receiver's own data order; a state of another model is refused before anything is
// replaced.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "core/errors.hpp"
#include "core/trainer.hpp"
#include "jobs/group_training.hpp"
#include "parallel/planner.hpp"
#include "parallel/state_exchange.hpp"
#include "parallel/topology.hpp"
#include "tests/parallel/trainer_steps.hpp"

using namespace strata;

namespace {

const char* const exchanged_yaml = R"(run: {name: exchange, seed: 5}
data:
  source: synthetic
  validation_fraction: 0.0
  synthetic: {train: 256, test: 32, classes: 4, channels: 1, height: 8, width: 8}
model:
  layers:
    - conv2d: {filters: 8, kernel: 3, init: glorot, split: column}
    - relu
    - flatten
    - dense: {units: 16, init: glorot, split: column}
    - tanh
    - dense: {units: 12, init: glorot, split: row}
    - relu
    - dropout: {rate: 0.2}
    - dense: {units: 4, init: glorot}
training:
  epochs: 1
  local_batch: 32
  optimizer: {type: adam, lr: 0.01}
parallel: {lr_scaling: none}
)";

const std::vector<std::string> prefixes{"weights/", "optimizer/", "trainer/"};

void train_steps(Trainer& trainer, std::int64_t steps) {
  strata::testing::train_until(trainer, trainer.position().global_step + steps);
}

}  // namespace

TEST_CASE("an exploit copies a group's training state bit for bit into another group",
          "[mpi][pbt]") {
  const Communicator world = Communicator::world();
  for (const int shards : {1, 2}) {
    if (world.size() % (2 * shards) != 0) continue;
    PlanRequest request;
    request.world_size = world.size();
    request.local_batch = 32;
    request.max_global_batch = 32;
    request.fixed_model = shards;
    const Plan plan = make_plan(request);
    REQUIRE(plan.model == shards);
    REQUIRE(plan.groups >= 2);
    const Topology topology(world, plan);
    const int group = topology.coords().group;
    // Each group its own member: its own seed (weights, data order) and learning rate.
    Config config = parse_config(exchanged_yaml, "x.yaml");
    config.run.seed = 100 + static_cast<std::uint64_t>(group);
    config.training.optimizer.lr = 0.01 * (group + 1);
    const TrainingData data = load_training_data(config);
    GroupTraining member(config, data, topology, plan, 1);
    train_steps(*member.trainer, 3 + group);  // positions differ too

    StateDict mine;
    member.trainer->save_state(mine);
    const StateDict before = strata::testing::whole_state(*member.trainer, topology);
    const std::int64_t own_shuffle = mine.get_int("data/shuffle_key");
    // Group 0 is the source, group 1 the target; the other groups take no part.
    std::vector<StateSend> sends;
    std::vector<StateReceive> receives;
    StateDict received = mine;
    if (group == 0) sends.push_back({1, &mine});
    if (group == 1) receives.push_back({0, &received});
    exchange_states(topology.peers(), sends, receives, prefixes, 7300);
    if (group == 1) member.trainer->load_state(received);
    const StateDict after = strata::testing::whole_state(*member.trainer, topology);

    // Group 0's whole state reaches every group over peers, to compare with.
    INFO("M = " << shards);
    for (const auto& [key, t] : before.tensors()) {
      std::vector<float> source = t.values;
      topology.peers().broadcast(source, 0);
      if (group != 1) continue;
      INFO(key);
      CHECK(after.tensor(key).values == source);  // bitwise: weights and Adam's moments
      if (key.starts_with("weights/")) CHECK(t.values != source);  // and they differed before
    }
    if (group == 1) {
      CHECK(after.get_int("trainer/global_step") == 3);
      CHECK(after.get_int("optimizer/steps") == 3);
      CHECK(after.get_int("data/shuffle_key") == own_shuffle);
      // It trains on from there like any member.
      train_steps(*member.trainer, 2);
      CHECK(member.trainer->position().global_step == 5);
    }
    world.barrier();
  }
}

TEST_CASE("a state of another model is refused before anything is replaced", "[mpi][pbt]") {
  const Communicator world = Communicator::world();
  StateDict mine;
  mine.put_tensor("weights/a", std::vector<float>{1, 2, 3}, {3}, ShardSpec::whole_tensor({3}));
  mine.put_int("optimizer/steps", 4);
  mine.put_int("data/shuffle_key", 9);
  StateDict other;
  other.put_tensor("weights/a", std::vector<float>{5, 6}, {2}, ShardSpec::whole_tensor({2}));
  other.put_int("optimizer/steps", 8);
  other.put_int("data/shuffle_key", 1);
  const StateDict kept = other;
  CHECK_THROWS_AS(copy_state_entries(mine, other, prefixes), DataError);
  CHECK(other.tensor("weights/a").values == kept.tensor("weights/a").values);
  CHECK(other.get_int("optimizer/steps") == 8);
  // The same shape: values and moved scalars replaced, data/ kept.
  StateDict same = mine;
  same.tensors()["weights/a"].values = {7, 8, 9};
  same.put_int("optimizer/steps", 1);
  same.put_int("data/shuffle_key", 2);
  copy_state_entries(mine, same, prefixes);
  CHECK(same.tensor("weights/a").values == std::vector<float>{1, 2, 3});
  CHECK(same.get_int("optimizer/steps") == 4);
  CHECK(same.get_int("data/shuffle_key") == 2);
  world.barrier();
}
