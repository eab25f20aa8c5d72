// A model trained on the GPU (DeviceModel) against the same model trained on the CPU from the same
// initial weights: losses and parameters after three SGD and Adam steps, dropout included; a
// Trainer whose steps run on the GPU against one on the CPU over two epochs, with one micro-batch
// per step and with two summed on the device; and a checkpoint's state copied from the GPU while
// training goes on.
#include <catch2/catch.hpp>

#include "core/dataset.hpp"
#include "core/loss.hpp"
#include "core/model.hpp"
#include "core/optimizer.hpp"
#include "core/trainer.hpp"
#include "core/training_data.hpp"
#include "cuda/device_model.hpp"
#include "tests/core/trainer_states.hpp"
#include "tests/gpu/gpu_test_util.hpp"

namespace {

using strata::LayerKind;
using strata::LayerSpec;
using strata::Tensor;

LayerSpec spec(LayerKind kind, std::string name) {
  LayerSpec s;
  s.kind = kind;
  s.name = std::move(name);
  return s;
}

std::vector<LayerSpec> small_cnn() {
  LayerSpec conv = spec(LayerKind::conv2d, "conv");
  conv.filters = 6;
  conv.kernel = 3;
  conv.padding = 1;
  conv.init = strata::InitKind::glorot;
  LayerSpec pool = spec(LayerKind::maxpool2d, "pool");
  pool.size = pool.stride = 2;
  LayerSpec drop = spec(LayerKind::dropout, "drop");
  drop.rate = 0.25f;
  LayerSpec fc1 = spec(LayerKind::dense, "fc1");
  fc1.units = 16;
  fc1.init = strata::InitKind::glorot;
  LayerSpec fc2 = spec(LayerKind::dense, "fc2");
  fc2.units = 4;
  fc2.init = strata::InitKind::glorot;
  return {conv, spec(LayerKind::relu, "relu"), pool, spec(LayerKind::flatten, "flat"), drop,
          fc1,  spec(LayerKind::tanh, "tanh"), fc2};
}

}  // namespace

TEST_CASE("a CNN trained on the GPU follows the same CNN trained on the CPU", "[gpu]") {
  const strata::Shape input{2, 10, 10};
  for (const auto kind : {strata::OptimizerKind::sgd, strata::OptimizerKind::adam}) {
    strata::OptimizerSpec optimizer;
    optimizer.kind = kind;
    optimizer.momentum = 0.9;
    optimizer.weight_decay = 1e-4;
    strata::Model cpu(small_cnn(), input, 4, 7), on_gpu(small_cnn(), input, 4, 7);
    auto cpu_optimizer = strata::make_optimizer(optimizer);
    strata::cuda::DeviceContext context(strata::cuda::bind_rank_to_device(0));
    strata::cuda::DeviceModel device(on_gpu, small_cnn(), optimizer, context);
    const std::int64_t batch = 12;
    for (std::uint64_t step = 0; step < 3; ++step) {
      Tensor images({batch, 2, 10, 10}, strata::test::random_values(batch * 200, 60 + step));
      std::vector<std::int32_t> labels(batch);
      for (std::int64_t b = 0; b < batch; ++b)
        labels[static_cast<std::size_t>(b)] = static_cast<std::int32_t>((b + step) % 4);
      cpu.set_noise_position(step, 0);
      Tensor grad_logits;
      const double loss =
          strata::softmax_cross_entropy(cpu.forward(images, true), labels, grad_logits);
      cpu.backward(images, grad_logits);
      cpu_optimizer->step(cpu.params(), 0.05);
      const auto result =
          device.train_step(images, labels, static_cast<double>(batch), 0.05, step, 0);
      INFO("step " << step << (kind == strata::OptimizerKind::adam ? ", adam" : ", sgd"));
      CHECK(result.loss_sum / batch == Approx(loss).epsilon(1e-4));
    }
    device.download_parameters();
    const auto want = cpu.params(), got = on_gpu.params();
    REQUIRE(want.size() == got.size());
    for (std::size_t k = 0; k < want.size(); ++k) {
      INFO(want[k].name);
      CHECK(strata::test::all_close(got[k].value->values(), want[k].value->values()));
    }
    // Evaluation (no dropout) gives the CPU's logits from the same weights.
    Tensor images({5, 2, 10, 10}, strata::test::random_values(1000, 70));
    const Tensor& logits = device.logits(images);
    const Tensor& expected = cpu.forward(images, false);
    CHECK(strata::test::all_close(logits.values(), expected.values()));
  }
}

TEST_CASE("a Trainer with its passes on the GPU trains two epochs as on the CPU", "[gpu]") {
  // accumulate: 2 sums two micro-batches' gradients on the device before the step.
  for (const int accumulate : {1, 2}) {
    INFO("accumulate " << accumulate);
    strata::Config config;
    config.file = "gpu_trainer";
    config.run.seed = 3;
    config.layers = small_cnn();
    config.training.epochs = 2;
    config.training.local_batch = 32;
    config.training.optimizer.lr = 0.05;
    config.training.optimizer.momentum = 0.9;
    config.parallel.accumulate = accumulate;
    strata::SyntheticSpec spec;
    spec.train = 640;
    spec.test = 128;
    spec.classes = 4;
    spec.channels = 2;
    spec.height = spec.width = 10;
    const strata::TrainingData data =
        strata::prepare_training_data(strata::make_synthetic(spec, 1), 0.2, 1);
    const strata::Plan plan = strata::standalone_plan(config);
    strata::Trainer cpu(config, strata::build_model(config, data), data, plan, 1);
    strata::Trainer gpu(config, strata::build_model(config, data), data, plan, 1);
    strata::cuda::GpuGradients engine(gpu.model(), config.layers, config.training.optimizer,
                                      strata::cuda::bind_rank_to_device(0));
    gpu.set_gradient_engine(&engine);
    CHECK(gpu.steps_on_engine());
    for (int epoch = 1; epoch <= 2; ++epoch) {
      const auto a = cpu.run_epoch({}), b = gpu.run_epoch({});
      INFO("epoch " << epoch);
      CHECK(b.train_loss == Approx(a.train_loss).epsilon(1e-3));
      CHECK(b.val_loss == Approx(a.val_loss).epsilon(1e-3));
      CHECK(std::abs(b.val_accuracy - a.val_accuracy) <= 0.02);
    }
    const auto want = cpu.model().params(), got = gpu.model().params();
    for (std::size_t k = 0; k < want.size(); ++k) {
      INFO(want[k].name);
      CHECK(strata::test::all_close(got[k].value->values(), want[k].value->values(), 1e-3f));
    }
  }
}

TEST_CASE("a GPU's state copied while training goes on is the state of its step", "[gpu]") {
  // Two trainings on the GPU: cuDNN's deterministic algorithms and cuBLAS repeat their sums, so
  // the two agree bit for bit.
  strata::Config config = strata::testing::state_config(strata::OptimizerKind::adam);
  const strata::TrainingData data = strata::load_training_data(config);
  const strata::Plan plan = strata::standalone_plan(config);
  const int device = strata::cuda::bind_rank_to_device(0);
  strata::Trainer reference(config, strata::build_model(config, data), data, plan, 1),
      gpu(config, strata::build_model(config, data), data, plan, 1);
  strata::cuda::GpuGradients reference_engine(reference.model(), config.layers,
                                              config.training.optimizer, device),
      engine(gpu.model(), config.layers, config.training.optimizer, device);
  reference.set_gradient_engine(&reference_engine);
  gpu.set_gradient_engine(&engine);
  strata::testing::train_steps(reference, 3);
  strata::testing::train_steps(gpu, 3);

  strata::StateDict in_flight, at_step_3;
  const auto complete = gpu.save_state_in_flight(in_flight);
  REQUIRE(complete);
  reference.save_state(at_step_3);
  CHECK(in_flight.tensor("weights/fc2/weight").values !=
        at_step_3.tensor("weights/fc2/weight").values);
  // Two more steps run while the copy travels (their updates wait for it); it still holds step 3.
  strata::testing::train_steps(gpu, 5);
  complete(in_flight);
  strata::testing::require_same(at_step_3, in_flight, true);
  strata::testing::train_steps(reference, 5);
  strata::StateDict a, b;
  reference.save_state(a);
  gpu.save_state(b);
  strata::testing::require_same(a, b, true);
}
