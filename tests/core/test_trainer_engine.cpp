// The trainer's side of device-resident training, without a GPU: an engine that "steps on its
// device" in a second copy of the model and optimizer in host memory. Its steps are the plain
// trainer's, so a trainer that uses it must end bit-identical to one that does not, which holds
// only if the trainer copies the state in and out at the right moments.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <vector>

#include "core/gradient_engine.hpp"
#include "core/loss.hpp"
#include "core/optimizer.hpp"
#include "core/trainer.hpp"
#include "core/training_data.hpp"
#include "tests/core/trainer_states.hpp"

using namespace strata;
using strata::testing::require_same;
using strata::testing::state_config;
using strata::testing::train_steps;

namespace {

struct SnapshotCopy final : StateCopy {
  std::map<const Tensor*, Tensor> values;
  bool waited = false;
  void wait() override { waited = true; }
  std::span<const float> values_of(const Tensor* host) const override {
    if (!waited) throw std::logic_error("values_of before wait");
    const auto it = values.find(host);
    if (it == values.end()) throw std::invalid_argument("not a tensor of this copy");
    return it->second.values();
  }
};

class CopyEngine final : public GradientEngine {
 public:
  CopyEngine(Model& host, const OptimizerSpec& spec)
      : host_(host), own_(host.replicate()), optimizer_(make_optimizer(spec)) {}

  int uploads = 0, downloads = 0, parameter_loads = 0, micro_batches = 0, state_copies = 0;
  std::vector<int> micro_batch_counts;

  Result gradients(const Tensor& images, std::span<const std::int32_t> labels, double divisor,
                   std::uint64_t step, std::uint64_t first_sample) override {
    copy_values(host_.params(), own_.params());
    const Result r = forward_backward(images, labels, divisor, step, first_sample);
    auto from = own_.params(), to = host_.params();
    for (std::size_t k = 0; k < from.size(); ++k) *to[k].grad = *from[k].grad;
    return r;
  }
  void load_parameters() override {
    ++parameter_loads;
    copy_values(host_.params(), own_.params());
  }
  const Tensor& logits(const Tensor& images) override { return own_.forward(images, false); }
  std::string where() const override { return "a copy in host memory"; }

  bool steps_on_device() const override { return true; }
  Result add_micro_batch(const Tensor& images, std::span<const std::int32_t> labels, double divisor,
                         std::uint64_t step, std::uint64_t first_sample, int index,
                         int count) override {
    ++micro_batches;
    micro_batch_counts.push_back(count);
    const auto params = own_.params();
    // The sum so far, kept while backward overwrites the gradients, then added back.
    std::vector<Tensor> so_far;
    if (index > 0)
      for (const Param& p : params) so_far.push_back(*p.grad);
    const Result r = forward_backward(images, labels, divisor, step, first_sample);
    for (std::size_t k = 0; k < so_far.size(); ++k)
      for (std::int64_t i = 0; i < so_far[k].size(); ++i)
        params[k].grad->data()[i] += so_far[k].data()[i];
    return r;
  }
  void apply_step(double lr) override {
    const auto params = own_.trainable_params();
    optimizer_->begin_step(params);
    for (std::size_t k = 0; k < params.size(); ++k)
      optimizer_->update(params[k], k, 0, params[k].value->size(), lr * params[k].lr_scale);
  }
  void upload_state(const std::vector<Param>& params, Optimizer& optimizer) override {
    ++uploads;
    copy_values(host_.params(), own_.params());
    copy_moments(optimizer.moments(params), optimizer_->moments(own_.trainable_params()));
    optimizer_->set_steps_taken(optimizer.steps_taken());
  }
  void download_state(const std::vector<Param>& params, Optimizer& optimizer) override {
    ++downloads;
    copy_values(own_.params(), host_.params());
    copy_moments(optimizer_->moments(own_.trainable_params()), optimizer.moments(params));
    optimizer.set_steps_taken(optimizer_->steps_taken());
  }
  // The values as they are now, keyed by the host tensors they are for: what a GPU's copy holds
  // once it has arrived, however many steps ran meanwhile.
  std::unique_ptr<StateCopy> start_state_copy(const std::vector<Param>& params,
                                              Optimizer& optimizer) override {
    ++state_copies;
    auto copy = std::make_unique<SnapshotCopy>();
    const auto host = host_.params(), own = own_.params();
    for (std::size_t k = 0; k < host.size(); ++k) copy->values[host[k].value] = *own[k].value;
    const auto host_moments = optimizer.moments(params);
    const auto own_moments = optimizer_->moments(own_.trainable_params());
    for (std::size_t b = 0; b < host_moments.size(); ++b)
      for (std::size_t k = 0; k < params.size(); ++k)
        copy->values[&(*host_moments[b])[k]] = (*own_moments[b])[k];
    optimizer.set_steps_taken(optimizer_->steps_taken());
    return copy;
  }

 private:
  static void copy_values(const std::vector<Param>& from, const std::vector<Param>& to) {
    REQUIRE(from.size() == to.size());
    for (std::size_t k = 0; k < from.size(); ++k) *to[k].value = *from[k].value;
  }
  static void copy_moments(const std::vector<std::vector<Tensor>*>& from,
                           const std::vector<std::vector<Tensor>*>& to) {
    REQUIRE(from.size() == to.size());
    for (std::size_t b = 0; b < from.size(); ++b) *to[b] = *from[b];
  }
  Result forward_backward(const Tensor& images, std::span<const std::int32_t> labels,
                          double divisor, std::uint64_t step, std::uint64_t first_sample) {
    own_.set_noise_position(step, first_sample);
    const Tensor& logits = own_.forward(images, true);
    Result r;
    r.loss_sum = softmax_cross_entropy(logits, labels, grad_logits_, divisor) *
                 static_cast<double>(labels.size());
    r.correct = count_correct(logits, labels);
    own_.backward(images, grad_logits_);
    return r;
  }

  Model& host_;
  Model own_;
  std::unique_ptr<Optimizer> optimizer_;
  Tensor grad_logits_;
};

StateDict state_of(Trainer& trainer) {
  StateDict out;
  trainer.save_state(out);
  return out;
}

}  // namespace

TEST_CASE("a trainer stepping on its engine ends bit-identical to one stepping on the host",
          "[trainer][engine]") {
  for (const auto optimizer : {OptimizerKind::sgd, OptimizerKind::adam}) {
    INFO((optimizer == OptimizerKind::adam ? "adam" : "sgd"));
    const Config config = state_config(optimizer);
    const TrainingData data = load_training_data(config);
    Trainer host(config, build_model(config, data), data, standalone_plan(config), 1),
        device(config, build_model(config, data), data, standalone_plan(config), 1);
    CopyEngine engine(device.model(), config.training.optimizer);
    device.set_gradient_engine(&engine);

    const EpochMetrics a1 = host.run_epoch({}), b1 = device.run_epoch({});
    // One upload before the first step; evaluation reads the engine's newer weights in place, and
    // nothing came back to the host yet.
    CHECK(engine.uploads == 1);
    CHECK(engine.downloads == 0);
    CHECK(engine.parameter_loads == 0);
    CHECK(a1.train_loss == b1.train_loss);
    CHECK(a1.val_accuracy == b1.val_accuracy);
    CHECK(a1.test_loss == b1.test_loss);
    const EpochMetrics a2 = host.run_epoch({}), b2 = device.run_epoch({});
    CHECK(a2.test_loss == b2.test_loss);
    CHECK(engine.uploads == 1);
    // save_state takes the engine's weights, moments and step count first.
    require_same(state_of(host), state_of(device), true);
    CHECK(engine.downloads == 1);
  }
}

TEST_CASE("a trainer on an engine takes a loaded state and changed weights before its next step",
          "[trainer][engine]") {
  const Config config = state_config(OptimizerKind::sgd);
  const TrainingData data = load_training_data(config);
  Trainer host(config, build_model(config, data), data, standalone_plan(config), 1),
      device(config, build_model(config, data), data, standalone_plan(config), 1);
  CopyEngine engine(device.model(), config.training.optimizer);
  device.set_gradient_engine(&engine);
  train_steps(device, 5);  // the engine is ahead of the host, and its state must be dropped

  // Resume mid-epoch from the host trainer's state: momentum and step count must reach the
  // engine, or the next steps differ.
  train_steps(host, host.steps_per_epoch() + 3);
  device.load_state(state_of(host));
  const int uploads = engine.uploads;
  train_steps(host, host.steps_per_epoch() + 9);
  train_steps(device, device.steps_per_epoch() + 9);
  CHECK(engine.uploads == uploads + 1);
  require_same(state_of(host), state_of(device), true);

  // Weights changed through model() (as loading pretrained weights does) reach the engine too.
  for (Trainer* t : {&host, &device}) {
    Tensor& bias = *t->model().params().back().value;
    for (float& v : bias.values()) v += 0.5f;
  }
  host.run_epoch({});
  device.run_epoch({});
  require_same(state_of(host), state_of(device), true);
}

TEST_CASE(
    "a trainer accumulating micro-batches on its engine ends bit-identical to the host's "
    "accumulation",
    "[trainer][engine]") {
  for (const auto optimizer : {OptimizerKind::sgd, OptimizerKind::adam}) {
    INFO((optimizer == OptimizerKind::adam ? "adam" : "sgd"));
    Config config = state_config(optimizer);
    config.parallel.accumulate = 2;  // two micro-batches of 8 per step of 16
    const TrainingData data = load_training_data(config);
    Trainer host(config, build_model(config, data), data, standalone_plan(config), 1),
        device(config, build_model(config, data), data, standalone_plan(config), 1);
    CopyEngine engine(device.model(), config.training.optimizer);
    device.set_gradient_engine(&engine);
    const EpochMetrics a = host.run_epoch({}), b = device.run_epoch({});
    // Every step's two micro-batches went to the engine, none of their gradients to the host.
    CHECK(engine.micro_batches == 2 * device.steps_per_epoch());
    CHECK(std::all_of(engine.micro_batch_counts.begin(), engine.micro_batch_counts.end(),
                      [](int count) { return count == 2; }));
    CHECK(engine.uploads == 1);
    CHECK(a.train_loss == b.train_loss);
    CHECK(a.test_loss == b.test_loss);
    require_same(state_of(host), state_of(device), true);
  }
}

TEST_CASE("a state saved while the engine's copy is in flight is the state of its step",
          "[trainer][engine][checkpoint]") {
  for (const auto optimizer : {OptimizerKind::sgd, OptimizerKind::adam}) {
    INFO((optimizer == OptimizerKind::adam ? "adam" : "sgd"));
    const Config config = state_config(optimizer);
    const TrainingData data = load_training_data(config);
    Trainer reference(config, build_model(config, data), data, standalone_plan(config), 1),
        device(config, build_model(config, data), data, standalone_plan(config), 1);
    CopyEngine engine(device.model(), config.training.optimizer);
    device.set_gradient_engine(&engine);
    train_steps(reference, 3);
    train_steps(device, 3);

    StateDict in_flight;
    const auto complete = device.save_state_in_flight(in_flight);
    REQUIRE(complete);
    CHECK(engine.state_copies == 1);
    CHECK(engine.downloads == 0);  // nothing waited for the engine
    const StateDict at_step_3 = state_of(reference);
    // Until the copy arrives the entries hold the host's older weights.
    CHECK(in_flight.tensor("weights/fc2/weight").values !=
          at_step_3.tensor("weights/fc2/weight").values);
    // Training goes on while the copy travels; what arrives is still step 3's state.
    train_steps(device, 5);
    complete(in_flight);
    require_same(at_step_3, in_flight, true);
    // And the copy left the training as it was.
    train_steps(reference, 5);
    require_same(state_of(reference), state_of(device), true);
  }
}

TEST_CASE("a trainer whose engine is not ahead saves in place, with nothing in flight",
          "[trainer][engine][checkpoint]") {
  const Config config = state_config(OptimizerKind::sgd);
  const TrainingData data = load_training_data(config);
  Trainer host(config, build_model(config, data), data, standalone_plan(config), 1);
  train_steps(host, 2);
  StateDict saved;
  CHECK_FALSE(host.save_state_in_flight(saved));
  require_same(state_of(host), saved, true);
}
