// The one state door: each part saves and restores every field (round trips after LBANN's: a
// non-default object, saved, read into a default one, compared field by field after checking the
// two differed), the checkpoint file keeps tensors and scalars exactly, and damage is reported.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "core/atomic_file.hpp"
#include "core/checkpoint_file.hpp"
#include "core/config.hpp"
#include "core/errors.hpp"
#include "core/shape_layers.hpp"
#include "core/state.hpp"
#include "core/trainer.hpp"
#include "core/training_data.hpp"
#include "tests/core/layer_specs.hpp"
#include "tests/core/temp_dir.hpp"
#include "tests/core/trainer_states.hpp"

using namespace strata;
using Catch::Matchers::Contains;

using strata::testing::differ_everywhere;
using strata::testing::require_same;
using strata::testing::state_config;
using strata::testing::train_steps;

TEST_CASE("a state dict reads slices of whole tensors along any axis", "[state]") {
  StateDict state;
  Tensor whole({2, 3}, std::vector<float>{0, 1, 2, 3, 4, 5});
  state.put_tensor("w", whole);
  std::vector<float> rows(3), columns(2);
  state.read_tensor("w", rows, {1, 3}, ShardSpec{{2, 3}, 0, 1});
  CHECK(rows == std::vector<float>{3, 4, 5});
  state.read_tensor("w", columns, {2, 1}, ShardSpec{{2, 3}, 1, 2});
  CHECK(columns == std::vector<float>{2, 5});
  CHECK_THROWS_WITH(state.read_tensor("missing", rows, {1, 3}, ShardSpec{{2, 3}, 0, 1}),
                    Contains("tensor missing is missing"));
  Tensor other({3, 2});
  CHECK_THROWS_WITH(state.read_tensor("w", other), Contains("has shape [2,3] but [3,2] is needed"));
  CHECK_THROWS_AS(state.get_int("nothing"), DataError);
}

TEST_CASE("a model saves and restores every parameter and its noise keys", "[state][model]") {
  const Config config = state_config(OptimizerKind::sgd);
  const TrainingData data = load_training_data(config);
  Model trained = build_model(config, data);
  Config other = config;
  other.run.seed = 99;
  Model fresh = build_model(other, data);
  StateDict saved, before;
  trained.save_state(saved, "weights");
  fresh.save_state(before, "weights");
  REQUIRE(differ_everywhere(saved, before));
  fresh.load_state(saved, "weights");
  StateDict after;
  fresh.save_state(after, "weights");
  require_same(saved, after);
  CHECK(dynamic_cast<DropoutLayer&>(fresh.layer(2)).key() ==
        dynamic_cast<DropoutLayer&>(trained.layer(2)).key());
}

TEST_CASE("a trainer restored mid-epoch continues bit-identically", "[state][trainer]") {
  for (const auto optimizer : {OptimizerKind::sgd, OptimizerKind::adam}) {
    INFO((optimizer == OptimizerKind::adam ? "adam" : "sgd"));
    const Config config = state_config(optimizer);
    const TrainingData data = load_training_data(config);
    Trainer first(config, build_model(config, data), data, standalone_plan(config), 2);
    const std::int64_t stop = first.steps_per_epoch() + 7;  // inside epoch 2
    train_steps(first, stop);
    StateDict saved;
    first.save_state(saved);
    CHECK(saved.get_int("trainer/epoch") == 2);
    CHECK(saved.get_int("trainer/epoch_step") == 7);
    CHECK(saved.get_int("trainer/global_step") == stop);

    Trainer second(config, build_model(config, data), data, standalone_plan(config), 2);
    StateDict before;
    second.save_state(before);
    REQUIRE(differ_everywhere(saved, before));
    second.load_state(saved);
    StateDict restored;
    second.save_state(restored);
    require_same(saved, restored);

    // Both go on to the end of epoch 2: the same metrics and weights, to the bit.
    const EpochMetrics a = first.run_epoch({}), b = second.run_epoch({});
    CHECK(a.train_loss == b.train_loss);
    CHECK(a.test_loss == b.test_loss);
    StateDict end_a, end_b;
    first.save_state(end_a);
    second.save_state(end_b);
    require_same(end_a, end_b, true);
  }
}

TEST_CASE("a trainer refuses the state of another global batch, model or optimizer",
          "[state][trainer]") {
  const Config config = state_config(OptimizerKind::sgd);
  const TrainingData data = load_training_data(config);
  Trainer trainer(config, build_model(config, data), data, standalone_plan(config), 1);
  StateDict saved;
  trainer.save_state(saved);
  Config bigger_batch = config;
  bigger_batch.training.local_batch = 32;
  Trainer other_batch(bigger_batch, build_model(bigger_batch, data), data,
                      standalone_plan(bigger_batch), 1);
  CHECK_THROWS_WITH(other_batch.load_state(saved), Contains("global batch of 16"));
  Config wider = config;
  wider.layers[1].units = 20;
  Trainer other_model(wider, build_model(wider, data), data, standalone_plan(wider), 1);
  CHECK_THROWS_WITH(other_model.load_state(saved),
                    Contains("weights/fc1/weight has shape [16,36] but [20,36]"));
  Config adam = config;
  adam.training.optimizer.kind = OptimizerKind::adam;
  adam.training.optimizer.momentum = 0.0;
  Trainer other_optimizer(adam, build_model(adam, data), data, standalone_plan(adam), 1);
  CHECK_THROWS_WITH(other_optimizer.load_state(saved), Contains("sgd optimizer state"));
}

TEST_CASE("a checkpoint file keeps every tensor and scalar exactly", "[state][checkpoint]") {
  testing::TempDir dir;
  StateDict state;
  state.put_tensor("weights/fc/weight",
                   Tensor({2, 2}, std::vector<float>{1.5f, -2.0f, 1e-30f, 3.25f}));
  state.put_tensor("optimizer/momentum/fc/weight", Tensor({4}, std::vector<float>{0, 1, 2, 3}));
  state.put_int("trainer/global_step", 1234567890123);
  state.put_int("weights/drop/key", -7);
  state.put_real("trainer/loss_sum", 0.1 + 0.2);
  state.put_text("optimizer/kind", "sgd");
  state.put_text("top", "level");
  const std::string path = dir.file("ckpt-00000001.h5");
  write_checkpoint(path, state);
  const StateDict read = read_checkpoint(path);
  require_same(state, read);
  CHECK(read.get_real("trainer/loss_sum") == 0.1 + 0.2);
}

TEST_CASE("a shard reads only its slices of a checkpoint's whole tensors", "[state][checkpoint]") {
  testing::TempDir dir;
  // A [4, 6] tensor whose element (r, c) is 10r + c, and a whole [3] one.
  std::vector<float> grid(24);
  for (std::size_t i = 0; i < grid.size(); ++i) grid[i] = static_cast<float>(10 * (i / 6) + i % 6);
  StateDict state;
  state.put_tensor("weights/rows", Tensor({4, 6}, grid));
  state.put_tensor("weights/columns", Tensor({4, 6}, grid));
  state.put_tensor("weights/bias", Tensor({3}, std::vector<float>{7, 8, 9}));
  state.put_int("trainer/global_step", 11);
  const std::string path = dir.file("ckpt-00000001.h5");
  write_checkpoint(path, state);

  // Shard 1 of 2 along the rows, shard 1 of 2 along the columns.
  StateDict layout;
  layout.put_tensor("weights/rows", std::vector<float>(12), {2, 6}, ShardSpec{{4, 6}, 0, 2});
  layout.put_tensor("weights/columns", std::vector<float>(12), {4, 3}, ShardSpec{{4, 6}, 1, 3});
  layout.put_tensor("weights/bias", Tensor({3}, std::vector<float>(3)));
  const StateDict mine = read_checkpoint_slices(path, layout);
  CHECK(mine.tensor("weights/rows").values ==
        std::vector<float>{20, 21, 22, 23, 24, 25, 30, 31, 32, 33, 34, 35});
  CHECK(mine.tensor("weights/rows").local_shape == Shape{2, 6});
  CHECK(mine.tensor("weights/columns").values ==
        std::vector<float>{3, 4, 5, 13, 14, 15, 23, 24, 25, 33, 34, 35});
  CHECK(mine.tensor("weights/columns").shard.axis == 1);
  CHECK(mine.tensor("weights/bias").values == std::vector<float>{7, 8, 9});
  CHECK(mine.get_int("trainer/global_step") == 11);
  // What a shard reads is what it would copy out of the whole tensor.
  std::vector<float> expected(12);
  copy_slice(grid, ShardSpec{{4, 6}, 1, 3}, {4, 3}, expected);
  CHECK(mine.tensor("weights/columns").values == expected);
  // A model of another shape is refused, naming the dataset.
  StateDict other;
  other.put_tensor("weights/rows", std::vector<float>(10), {2, 5}, ShardSpec{{4, 5}, 0, 2});
  CHECK_THROWS_WITH(read_checkpoint_slices(path, other),
                    Contains("dataset /weights/rows has shape [4, 6], this model's [4, 5]"));
}

TEST_CASE("a damaged checkpoint is reported with the file and the reason", "[state][checkpoint]") {
  testing::TempDir dir;
  StateDict state;
  std::vector<float> pattern(64);
  for (std::size_t i = 0; i < pattern.size(); ++i) pattern[i] = 1000.0f + static_cast<float>(i);
  state.put_tensor("weights/w", pattern, {64}, ShardSpec::whole_tensor({64}));
  state.put_int("trainer/global_step", 5);
  write_checkpoint(dir.file("good.h5"), state);
  std::ifstream in(dir.file("good.h5"), std::ios::binary);
  const std::vector<char> bytes((std::istreambuf_iterator<char>(in)), {});

  SECTION("a flipped byte inside a tensor's data") {
    std::vector<char> damaged = bytes;
    const char* first = reinterpret_cast<const char*>(pattern.data());
    const auto at = std::search(damaged.begin(), damaged.end(), first, first + 256);
    REQUIRE(at != damaged.end());
    *(at + 100) = static_cast<char>(*(at + 100) ^ 0x10);
    write_file_atomically(dir.file("c.h5"), damaged);
    CHECK_THROWS_WITH(read_checkpoint(dir.file("c.h5")),
                      Contains("dataset /weights/w: checksum mismatch") && Contains("c.h5"));
  }
  SECTION("a truncated file") {
    write_file_atomically(dir.file("c.h5"),
                          std::vector<char>(bytes.begin(), bytes.begin() + bytes.size() / 2));
    CHECK_THROWS_AS(read_checkpoint(dir.file("c.h5")), DataError);
  }
  SECTION("a missing file") {
    CHECK_THROWS_WITH(read_checkpoint(dir.file("none.h5")), Contains("file not found"));
  }
  SECTION("a weights file is not a checkpoint") {
    std::vector<char> file = bytes;
    std::string text(file.begin(), file.end());
    const auto at = text.find("strata-checkpoint");
    REQUIRE(at != std::string::npos);
    file[at + 7] = 'X';
    write_file_atomically(dir.file("c.h5"), file);
    CHECK_THROWS_WITH(read_checkpoint(dir.file("c.h5")), Contains("not a strata checkpoint"));
  }
}

TEST_CASE("an atomic write leaves no file under the final name when it fails",
          "[state][checkpoint]") {
  testing::TempDir dir;
  const std::string target = dir.file("no/such/dir/w.h5");
  CHECK_THROWS_WITH(write_text_atomically(target, "x"),
                    Contains("cannot write") && Contains("w.h5"));
  CHECK_FALSE(std::filesystem::exists(target));
  write_text_atomically(dir.file("a.txt"), "first");
  write_text_atomically(dir.file("a.txt"), "second");
  std::ifstream in(dir.file("a.txt"));
  CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == "second");
  CHECK_FALSE(std::filesystem::exists(dir.file("a.txt.tmp")));
}

TEST_CASE("frozen layers keep their weights bit-identical and have no optimizer state",
          "[trainer][freeze]") {
  Config config = state_config(OptimizerKind::adam);
  config.training.freeze = {{"fc1", {}}};
  const TrainingData data = load_training_data(config);
  Trainer trainer(config, build_model(config, data), data, standalone_plan(config), 2);
  StateDict before;
  trainer.save_state(before);
  trainer.run_epoch({});
  StateDict after;
  trainer.save_state(after);
  CHECK(after.tensor("weights/fc1/weight").values == before.tensor("weights/fc1/weight").values);
  CHECK(after.tensor("weights/fc1/bias").values == before.tensor("weights/fc1/bias").values);
  CHECK(after.tensor("weights/fc2/weight").values != before.tensor("weights/fc2/weight").values);
  // No optimizer state for it, and it is not among the parameters a gradient sync reduces.
  CHECK_FALSE(after.has_tensor("optimizer/first_moment/fc1/weight"));
  CHECK(after.has_tensor("optimizer/first_moment/fc2/weight"));
  for (const auto& p : trainer.model().trainable_params()) CHECK_FALSE(p.name.starts_with("fc1/"));
  CHECK(trainer.model().params().size() == trainer.model().trainable_params().size() + 2);
}

TEST_CASE("training.freeze names layers of the model", "[config][freeze]") {
  const std::string yaml = R"(data: {source: synthetic}
model: {layers: [flatten, {dense: {units: 10, name: head}}]}
training:
  freeze: [head, trunk]
)";
  CHECK_THROWS_WITH(parse_config(yaml, "f.yaml"),
                    Contains("f.yaml:4:18: training.freeze: no layer named 'trunk' (layers: "
                             "flatten_0, head)"));
}
