// The checkpoint store's background write of a state completed on its writer thread (a GPU's
// parameters still on their way when the checkpoint was taken).
#include <catch2/catch.hpp>

#include <stdexcept>
#include <thread>
#include <vector>

#include "jobs/checkpoint_store.hpp"
#include "tests/core/temp_dir.hpp"

using namespace strata;

namespace {

StateDict placeholder_state() {
  StateDict state;
  state.put_tensor("weights/w", Tensor({3}, std::vector<float>{0.0f, 0.0f, 0.0f}));
  state.put_int("trainer/global_step", 7);
  return state;
}

}  // namespace

TEST_CASE("a state completed on the writer thread is what the checkpoint holds", "[checkpoint]") {
  const testing::TempDir dir;
  CheckpointStore store(dir.str(), 2);
  const std::thread::id caller = std::this_thread::get_id();
  std::thread::id completer;
  store.save(placeholder_state(), [&](StateDict& state) {
    completer = std::this_thread::get_id();
    std::vector<float>& values = state.tensors().at("weights/w").values;
    values = {4.0f, 5.0f, 6.0f};
  });
  store.wait();
  CHECK(completer != std::thread::id());
  CHECK(completer != caller);  // the caller went on meanwhile
  const auto loaded = store.load_newest([](const std::string&) {});
  REQUIRE(loaded);
  CHECK(loaded->state.tensor("weights/w").values == std::vector<float>{4.0f, 5.0f, 6.0f});
  CHECK(loaded->state.get_int("trainer/global_step") == 7);
}

TEST_CASE("a completion that fails is reported at the next wait, and writes no checkpoint",
          "[checkpoint]") {
  const testing::TempDir dir;
  CheckpointStore store(dir.str(), 2);
  store.save(placeholder_state(),
             [](StateDict&) { throw std::runtime_error("the copy from the device failed"); });
  CHECK_THROWS_WITH(store.wait(), Catch::Contains("the copy from the device failed"));
  CHECK(store.list().empty());
  // The store goes on: the next checkpoint is written.
  store.save(placeholder_state());
  store.wait();
  CHECK(store.list().size() == 1);
}

TEST_CASE("a written state's buffers are kept for the next snapshot", "[checkpoint]") {
  const testing::TempDir dir;
  CheckpointStore store(dir.str(), 2);
  store.save(placeholder_state());
  store.wait();
  const StateDict kept = store.take_buffers();
  CHECK(kept.tensor("weights/w").values.size() == 3);
  CHECK(kept.get_int("trainer/global_step") == 7);
  CHECK(store.list().size() == 1);
}
