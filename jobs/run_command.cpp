// `strata run CONFIG`: runs the config's stages; today the one stage kind is `train`.
#include <sched.h>

#include <cmath>

#include <fmt/format.h>

#include "core/config.hpp"
#include "core/conv2d_layer.hpp"
#include "core/cpu_kernels.hpp"
#include "core/device.hpp"
#include "core/trainer.hpp"
#include "core/weights_io.hpp"
#include "jobs/commands.hpp"
#include "jobs/run_output.hpp"

namespace strata {

std::string format_duration(double seconds) {
  const auto s = static_cast<long>(std::lround(std::max(seconds, 0.0)));
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

int resolve_threads(int requested) {
  if (requested > 0) return requested;
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) return std::max(CPU_COUNT(&set), 1);
  return 1;
}

namespace {

void print_kernels(Trainer& trainer) {
  const auto report = kernel_report();
  fmt::print("[device] {}\n", detect_devices().summary);
  fmt::print("[kernels] OpenBLAS core {} (CPU: {}); {} worker thread(s), single-threaded kernels each\n",
             report.openblas_core, report.cpu_best, trainer.threads());
  if (!report.warning.empty()) fmt::print(stderr, "warning: {}\n", report.warning);
}

void print_conv_implementations(Model& model) {
  for (std::size_t i = 0; i < model.layer_count(); ++i)
    if (auto* conv = dynamic_cast<Conv2DLayer*>(&model.layer(i)))
      fmt::print("[kernels] {}: oneDNN {}\n", conv->name(), conv->implementation());
}

void train_stage(const Config& config, RunOutput& output, int threads) {
  const TrainingData data = load_training_data(config);
  fmt::print("[data] {} train / {} validation / {} test samples, shape {}, {} classes\n", data.train.count(),
             data.validation.count(), data.test.count(), shape_string(data.sample_shape), data.num_classes);
  Trainer trainer(config, data, threads);
  print_kernels(trainer);
  fmt::print("[model]\n{}", trainer.model().summary());
  const int epochs = config.training.epochs;
  fmt::print("[train] {} epochs x {} steps of batch {}\n", epochs, trainer.steps_per_epoch(),
             config.training.local_batch);
  std::fflush(stdout);
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    const EpochMetrics m = trainer.run_epoch(epoch, [](const TrainProgress& p) {
      fmt::print("[train] epoch {}/{} step {}/{} loss {:.4f} lr {:.4g} {:.0f} samples/s ETA {}\n", p.epoch, p.epochs,
                 p.step, p.steps_per_epoch, p.loss, p.lr, p.samples_per_s, format_duration(p.eta_seconds));
      std::fflush(stdout);
    });
    if (epoch == 1) print_conv_implementations(trainer.model());
    output.append_metrics(m);
    fmt::print(
        "[epoch {}/{}] train loss {:.4f} acc {:.4f} | val loss {:.4f} acc {:.4f} | test acc {:.4f} | "
        "{:.0f} samples/s | {:.1f}s\n",
        epoch, epochs, m.train_loss, m.train_accuracy, m.val_loss, m.val_accuracy, m.test_accuracy, m.samples_per_s,
        m.seconds);
    std::fflush(stdout);
  }
  save_weights(output.weights_path().string(), trainer.model());
}

}  // namespace

int run_command(const RunOptions& options) {
  const Config config = load_config(options.config_path);
  RunOutput output(config.output.dir, options.fresh);
  if (!output.moved_aside().empty())
    fmt::print("[run] --fresh: the earlier run in {} was moved to {}\n", output.dir().string(),
               output.moved_aside().string());
  const int threads = resolve_threads(options.threads >= 0 ? options.threads : config.run.threads);
  fmt::print("[run] {} from {}, seed {}, output {}\n", config.run.name, config.file, config.run.seed,
             output.dir().string());
  for (const auto& stage : config.stages) {
    if (stage.kind == StageKind::train) train_stage(config, output, threads);
  }
  fmt::print("[run] done. Results: {} (per-epoch metrics), {} (final weights)\n", output.metrics_path().string(),
             output.weights_path().string());
  return 0;
}

int predict_command(const std::string& config_path, const std::string& weights_path, int threads) {
  const Config config = load_config(config_path);
  const TrainingData data = load_training_data(config);
  Trainer trainer(config, data, resolve_threads(threads >= 0 ? threads : config.run.threads));
  load_weights(weights_path, trainer.model());
  trainer.broadcast_weights();
  const Evaluation test = trainer.evaluate(data.test);
  fmt::print("test accuracy {:.4f} loss {:.4f} ({} samples, weights {})\n", test.accuracy, test.loss, test.count,
             weights_path);
  return 0;
}

}  // namespace strata
