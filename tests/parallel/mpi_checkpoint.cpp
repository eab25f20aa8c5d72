// A checkpoint does not depend on the decomposition: written by 4 ranks as D=2 x M=2 (each shard
// its slices of the whole tensors), it loads on 2 ranks as D=1 x M=2 and on 1 rank with every
// weight and optimizer moment reassembled bitwise, and 5 more steps there stay within 1e-5 of the
// uninterrupted run (summation order differs between decompositions, so not bitwise).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <optional>

#include <fmt/format.h>

#include "core/checkpoint_file.hpp"
#include "core/errors.hpp"
#include "core/trainer.hpp"
#include "jobs/group_training.hpp"
#include "parallel/checkpoint_shards.hpp"
#include "parallel/planner.hpp"
#include "parallel/step_vote.hpp"
#include "parallel/topology.hpp"
#include "tests/parallel/trainer_steps.hpp"
#include "tests/parallel/whole_state.hpp"

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

// The DataError `act` throws on this rank ("" for none), checked to be every rank's alike: a
// failure agreed on, with none left waiting.
std::string error_on_every_rank(const Communicator& world, const std::function<void()>& act) {
  std::string message;
  try {
    act();
  } catch (const DataError& e) {
    message = e.what();
  }
  const std::vector<std::string> everyone = world.allgather_strings(message);
  for (const std::string& m : everyone) CHECK(m == everyone.front());
  return message;
}

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
  // Written as strata run writes it: replica 0's two shards, each its own slices.
  std::string path;
  if (world.rank() == 0) path = fmt::format("/tmp/strata-mpi-reshard-{}.h5", ::getpid());
  world.broadcast_string(path, 0);
  if (written_on.coords().data == 0) {
    StateDict local;
    original.trainer->save_state(local);
    write_checkpoint_shards(path, local, written_on.model());
  }
  world.barrier();
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
      // On M=2 each shard reads its slices only, as strata run resumes.
      StateDict layout;
      resumed.trainer->save_state(layout);
      resumed.trainer->load_state(ranks == 2
                                      ? read_checkpoint_shards(path, layout, topology.model())
                                      : read_checkpoint(path));
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
  const StateDict whole = strata::testing::gather_whole_state(local, world);
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
}

TEST_CASE("the shards write their own slices of one checkpoint file", "[mpi][checkpoint]") {
  const Communicator world = Communicator::world();
  const int n = world.size(), r = world.rank();
  // Rank r's slices: rows of a [2n, 3] tensor, columns of a [5, n] one, and the middle axis of a
  // [2, 2n, 3] one (blocks of the shards' runs interleaved in the file); a whole tensor and
  // scalars that only shard 0's copy of should reach the file.
  StateDict local;
  const auto values = [&](std::size_t count, float base) {
    std::vector<float> v(count);
    for (std::size_t i = 0; i < count; ++i) v[i] = base + 1000.0f * r + static_cast<float>(i);
    return v;
  };
  local.put_tensor("weights/rows", values(6, 0.5f), {2, 3}, ShardSpec{{2 * n, 3}, 0, 2 * r});
  local.put_tensor("weights/columns", values(5, 0.25f), {5, 1}, ShardSpec{{5, n}, 1, r});
  local.put_tensor("optimizer/middle", values(12, -7.0f), {2, 2, 3},
                   ShardSpec{{2, 2 * n, 3}, 1, 2 * r});
  local.put_tensor("weights/whole", std::vector<float>{r == 0 ? 3.0f : -1.0f, 4.0f}, {2},
                   ShardSpec::whole_tensor({2}));
  local.put_int("trainer/global_step", 41);
  local.put_real("meta/elapsed_seconds", 10.0 + r);
  local.put_text("meta/stage", "train");
  const StateDict expected = strata::testing::gather_whole_state(local, world);

  std::string dir;
  if (r == 0) dir = fmt::format("/tmp/strata-mpi-shards-{}", ::getpid());
  world.broadcast_string(dir, 0);
  if (r == 0) std::filesystem::create_directories(dir);
  world.barrier();
  const std::string path = dir + "/ckpt.h5";
  std::vector<std::size_t> progress;  // (done, total) pairs, from the shard's writer thread
  {
    ShardedCheckpointWrite write(path, local, world, [&](std::size_t done, std::size_t total) {
      progress.insert(progress.end(), {done, total});
    });
    // The slices are written in the background; the file is named only once every shard is done.
    CHECK_FALSE(std::filesystem::exists(path));
    write.finish();
  }
  CHECK(progress == std::vector<std::size_t>{1, 3, 2, 3, 3, 3});
  CHECK(std::filesystem::exists(path));
  CHECK_FALSE(std::filesystem::exists(path + ".tmp"));
  // Every rank reads it whole, every checksum verified: the slices in place, shard 0's scalars.
  const StateDict read = read_checkpoint(path);
  REQUIRE(read.tensors().size() == expected.tensors().size());
  for (const auto& [key, t] : expected.tensors()) {
    INFO(key);
    CHECK(read.tensor(key).values ==
          (key == "weights/whole" ? std::vector<float>{3.0f, 4.0f} : t.values));
    CHECK(read.tensor(key).local_shape == t.shard.whole);
  }
  CHECK(read.get_int("trainer/global_step") == 41);
  CHECK(read.get_real("meta/elapsed_seconds") == 10.0);
  CHECK(read.get_text("meta/stage") == "train");
  CHECK(read.scalars().size() == 3);
  // The same tensors as the one-writer file of the gathered state, whose checksums read_checkpoint
  // verified as it verified the shards'.
  if (r == 0) {
    StateDict gathered = expected;
    gathered.tensors()["weights/whole"].values = {3.0f, 4.0f};
    gathered.scalars() = local.scalars();
    write_checkpoint(dir + "/one_writer.h5", gathered);
    const StateDict one = read_checkpoint(dir + "/one_writer.h5");
    for (const auto& [key, t] : one.tensors()) CHECK(read.tensor(key).values == t.values);
  }
  world.barrier();

  // Every shard reads back its own part only, every checksum verified from the shards' slices.
  const StateDict mine = read_checkpoint_shards(path, local, world);
  for (const auto& [key, t] : local.tensors()) {
    INFO(key);
    CHECK(mine.tensor(key).shard == t.shard);
    CHECK(mine.tensor(key).values ==
          (key == "weights/whole" ? std::vector<float>{3.0f, 4.0f} : t.values));
  }
  CHECK(mine.get_real("meta/elapsed_seconds") == 10.0);
  world.barrier();

  // A byte of the last shard's slice flipped in the file: the combined checksum finds it, in the
  // whole file and among the shards' slices alike.
  if (r == 0) {
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(file)), {});
    // The last column slice's first value, 0.25 + 1000 (n - 1), is unique in the file.
    const float needle = 0.25f + 1000.0f * static_cast<float>(n - 1);
    const auto at = bytes.find(std::string(reinterpret_cast<const char*>(&needle), sizeof needle));
    REQUIRE(at != std::string::npos);
    file.seekp(static_cast<std::streamoff>(at));
    file.put(static_cast<char>(bytes[at] ^ 0x01));
    file.close();
    CHECK_THROWS_WITH(read_checkpoint(path), Catch::Contains("weights/columns: checksum mismatch"));
  }
  world.barrier();
  CHECK_THAT(error_on_every_rank(world, [&] { read_checkpoint_shards(path, local, world); }),
             Catch::Contains("/weights/columns: checksum mismatch"));

  // A write that fails on the last shard's thread alone (its disk full) fails finish() on every
  // shard with that shard's error, and leaves neither the file nor the temporary one.
  const auto check_nothing_left = [&](const std::string& file) {
    CHECK_FALSE(std::filesystem::exists(file));
    CHECK_FALSE(std::filesystem::exists(file + ".tmp"));
    world.barrier();
  };
  const std::string failing = dir + "/failing.h5";
  CHECK_THAT(error_on_every_rank(world,
                                 [&] {
                                   ShardedCheckpointWrite write(
                                       failing, local, world, [&](std::size_t done, std::size_t) {
                                         if (r == n - 1 && done == 2)
                                           throw DataError("No space left on device (injected)");
                                       });
                                   write.finish();
                                 }),
             Catch::Contains("No space left on device (injected)"));
  check_nothing_left(failing);

  // Shard 0 cannot record the slices' checksums (here its file's signature is overwritten once
  // its slices are written, so HDF5 cannot open it): finish() fails on every shard with its error,
  // and leaves neither the file nor the temporary one.
  const std::string unrecorded = dir + "/unrecorded.h5";
  const auto unopenable_frame = [&](std::size_t done, std::size_t total) {
    if (r != 0 || done != total) return;
    std::fstream file(unrecorded + ".tmp", std::ios::in | std::ios::out | std::ios::binary);
    file.write("NOT HDF5", 8);
  };
  CHECK_THAT(error_on_every_rank(world,
                                 [&] {
                                   ShardedCheckpointWrite write(unrecorded, local, world,
                                                                unopenable_frame);
                                   write.finish();
                                 }),
             Catch::Contains(unrecorded + ".tmp") && Catch::Contains("cannot open for writing"));
  check_nothing_left(unrecorded);

  // Destroyed before finish() (the job ends another way): only the temporary file is left, which
  // no resume reads.
  const std::string unfinished = dir + "/unfinished.h5";
  { ShardedCheckpointWrite write(unfinished, local, world); }
  world.barrier();
  CHECK_FALSE(std::filesystem::exists(unfinished));
  CHECK(std::filesystem::exists(unfinished + ".tmp"));
  world.barrier();

  // Where shard 0 cannot create the file, every shard throws the same error, and none hangs.
  CHECK_THAT(error_on_every_rank(
                 world, [&] { write_checkpoint_shards(dir + "/missing/ckpt.h5", local, world); }),
             Catch::Contains("missing/ckpt.h5.tmp"));
  world.barrier();
  if (r == 0) std::filesystem::remove_all(dir);
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
