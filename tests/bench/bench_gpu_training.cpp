// strata's training step on one GPU (DeviceModel: cuDNN convolutions and pooling, cuBLAS dense
// products, the kernels, the optimizer on the device) for the benchmark CNN and an MLP
// 784-512-256-10: samples/s per batch size, one JSON line per row on stdout. Each step uploads its
// batch from host memory, as the trainer does. tests/bench/run_gpu_bench.sh runs it beside PyTorch
// on the same GPU. Exits 77 when the CUDA runtime sees no GPU.
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "core/config.hpp"
#include "core/model.hpp"
#include "core/rng.hpp"
#include "cuda/device_model.hpp"
#include "tests/bench/bench_util.hpp"

namespace {

struct Options {
  std::vector<int> batches{64, 256};
  double seconds = 3.0, warmup_seconds = 1.0;
  int repeats = 3, samples = 8192;
  std::string cnn_config = STRATA_SOURCE_DIR "/configs/fashion_cnn.yaml";
};

std::vector<strata::LayerSpec> mlp_layers() {
  std::vector<strata::LayerSpec> layers;
  auto add = [&](strata::LayerKind kind, int units = 0) {
    strata::LayerSpec s;
    s.kind = kind;
    s.units = units;
    s.init = strata::InitKind::glorot;
    s.name = fmt::format("{}_{}", strata::to_string(kind), layers.size());
    layers.push_back(s);
  };
  add(strata::LayerKind::flatten);
  add(strata::LayerKind::dense, 512);
  add(strata::LayerKind::relu);
  add(strata::LayerKind::dense, 256);
  add(strata::LayerKind::relu);
  add(strata::LayerKind::dense, 10);
  return layers;
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

void measure(const std::string& name, const std::vector<strata::LayerSpec>& layers, int batch,
             const Options& o, strata::cuda::DeviceContext& context) {
  strata::Model host(layers, {1, 28, 28}, 10, 1);
  strata::OptimizerSpec sgd;
  sgd.lr = 0.01;
  sgd.momentum = 0.9;
  strata::cuda::DeviceModel model(host, layers, sgd, context);
  strata::Rng rng(2);
  std::vector<float> images(static_cast<std::size_t>(o.samples) * 784);
  for (float& v : images) v = rng.normal();
  std::vector<std::int32_t> labels(static_cast<std::size_t>(o.samples));
  for (auto& l : labels) l = static_cast<std::int32_t>(rng.below(10));
  strata::Tensor batch_images({batch, 1, 28, 28});
  std::int64_t cursor = 0;
  std::uint64_t step = 0;
  auto one_step = [&] {
    if (cursor + batch > o.samples) cursor = 0;
    std::copy(images.begin() + cursor * 784, images.begin() + (cursor + batch) * 784,
              batch_images.data());
    model.train_step(batch_images,
                     std::span<const std::int32_t>(labels).subspan(static_cast<std::size_t>(cursor),
                                                                   static_cast<std::size_t>(batch)),
                     batch, sgd.lr, step++, 0);
    cursor += batch;
  };
  // Warm-up (cuDNN's algorithm choice, the allocator's first blocks), then size the repeats.
  auto start = std::chrono::steady_clock::now();
  int warm_steps = 0;
  while (seconds_since(start) < o.warmup_seconds || warm_steps < 5) {
    one_step();
    ++warm_steps;
  }
  start = std::chrono::steady_clock::now();
  for (int i = 0; i < 5; ++i) one_step();
  const int steps = std::max(5, static_cast<int>(o.seconds / (seconds_since(start) / 5)));
  std::vector<double> rates;
  for (int r = 0; r < o.repeats; ++r) {
    start = std::chrono::steady_clock::now();
    for (int i = 0; i < steps; ++i) one_step();  // train_step waits for its stream
    rates.push_back(steps * batch / seconds_since(start));
  }
  std::string repeats;
  for (double v : rates) repeats += fmt::format("{}{:.1f}", repeats.empty() ? "" : ", ", v);
  fmt::print(
      "{{\"model\": \"{}\", \"batch\": {}, \"samples_per_s\": {:.1f}, \"repeats\": [{}], "
      "\"device\": \"{}\"}}\n",
      name, batch, strata::bench::median(rates), repeats, model.where());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"strata's training step on one GPU (tests/bench/run_gpu_bench.sh runs it)"};
  app.add_option("--batches", o.batches, "batch sizes")->delimiter(',');
  app.add_option("--seconds", o.seconds, "length of one timed repeat")->check(CLI::PositiveNumber);
  app.add_option("--warmup-seconds", o.warmup_seconds, "untimed training per row");
  app.add_option("--repeats", o.repeats, "timed repeats per row; the median is reported")
      ->check(CLI::PositiveNumber);
  app.add_option("--cnn-config", o.cnn_config, "config whose layers are the CNN")
      ->check(CLI::ExistingFile);
  CLI11_PARSE(app, argc, argv);
  if (strata::cuda::visible_devices() == 0) {
    std::fprintf(stderr, "strata_bench_gpu_training: the CUDA runtime sees no GPU\n");
    return 77;
  }
  try {
    strata::cuda::DeviceContext context(strata::cuda::bind_rank_to_device(0));
    const auto cnn = strata::load_config(o.cnn_config).layers;
    for (int batch : o.batches) measure("cnn", cnn, batch, o, context);
    for (int batch : o.batches) measure("mlp", mlp_layers(), batch, o, context);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "strata_bench_gpu_training: %s\n", e.what());
    return 1;
  }
  return 0;
}
