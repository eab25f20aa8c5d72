// Single-rank training throughput of strata against PyTorch, measured in the same run.
//
// For each row (model x batch) it times strata's Trainer (the code path `strata run` takes), and
// before its first timed repeat and after each it runs one repeat of tests/bench/torch_reference.py
// on the same row and times oneDNN's sgemm (what the dense layers run), so that each strata repeat
// is compared with PyTorch and with the machine's matrix-multiply peak at its own time: the
// machine's speed drifts within a row.
// Progress goes to stderr; stdout is the Markdown block for the README.
#include <omp.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "core/config.hpp"
#include "core/conv2d_layer.hpp"
#include "core/cpu_kernels.hpp"
#include "core/dataset.hpp"
#include "core/gemm.hpp"
#include "core/trainer.hpp"
#include "core/training_data.hpp"
#include "tests/bench/bench_util.hpp"
#include "tests/bench/training_cases.hpp"

namespace {

using strata::bench::core_round_trip_ns;
using strata::bench::grouped;
using strata::bench::median;
using strata::bench::repeats_string;

using Clock = std::chrono::steady_clock;

struct Options {
  int threads = 2;
  double seconds = 3.0;         // per timed repeat
  double warmup_seconds = 1.0;  // per row, before the repeats
  // The host moves the two vCPUs apart for seconds at a time (core_round_trip_ns): with 5, two
  // repeats caught there leave the median alone.
  int repeats = 5;
  int train_samples = 8192;
  int sgemm_n = 2048;
  std::vector<int> batches{64, 256};
  std::string cnn_config = STRATA_SOURCE_DIR "/configs/fashion_cnn.yaml";
  std::string python =
      "/usr/bin/python3";  // Debian's, which has torch; pyenv's python3 on PATH does not
  std::string torch_script = STRATA_SOURCE_DIR "/tests/bench/torch_reference.py";
};

struct ModelCase {
  std::string key;    // "cnn" or "mlp", as torch_reference.py names it
  std::string label;  // for the table
  std::vector<strata::LayerSpec> layers;
};

struct Row {
  std::string key, model;
  int batch = 0;
  double strata = 0.0, torch = 0.0;  // median samples/s
  // PyTorch runs one repeat before strata's first and after each, so that each strata repeat is
  // compared with PyTorch at its own time (the faster of the two repeats either side of it):
  // `ratio` is the median of those comparisons.
  std::vector<double> strata_repeats, torch_repeats;
  double ratio = 0.0;
  // GFLOP/s of sgemm on 1 and on --threads threads, measured before the row's first strata repeat
  // and after each (the median of these), and each repeat's samples/s as a share of the faster of
  // the sgemm rates either side of it: the machine's speed drifts within a row, so a repeat is
  // compared with the peak at its own time.
  double sgemm_1 = 0.0, sgemm_t = 0.0;
  std::vector<double> share_1, share_t;  // per repeat: samples/s per sgemm GFLOP/s
  // Core-to-core round trips before the first repeat and after each: whether the host had the two
  // vCPUs on one L3 at the time, which slows whatever crosses between the workers' cores.
  std::vector<double> round_trip_ns;
};

// ---- FLOP count -------------------------------------------------------------------------------

// Multiply-adds of one sample's forward pass through each layer, walking the shapes like Model
// does. Pools, activations and biases are left out: they are a few percent and not sgemm-like work.
struct LayerFlops {
  double macs = 0.0;
  bool has_params = false;
};

std::vector<LayerFlops> forward_macs(const std::vector<strata::LayerSpec>& layers,
                                     strata::Shape shape) {
  using strata::LayerKind;
  std::vector<LayerFlops> out;
  for (const auto& spec : layers) {
    LayerFlops f;
    std::int64_t size = 1;
    for (auto d : shape) size *= d;
    switch (spec.kind) {
      case LayerKind::conv2d: {
        const std::int64_t h = (shape[1] + 2 * spec.padding - spec.kernel) / spec.stride + 1;
        const std::int64_t w = (shape[2] + 2 * spec.padding - spec.kernel) / spec.stride + 1;
        f = {static_cast<double>(h * w * spec.filters) * spec.kernel * spec.kernel *
                 static_cast<double>(shape[0]),
             true};
        shape = {spec.filters, h, w};
        break;
      }
      case LayerKind::maxpool2d:
      case LayerKind::avgpool2d:
        shape = {shape[0], shape[1] / spec.size, shape[2] / spec.size};
        break;
      case LayerKind::flatten:
        shape = {size};
        break;
      case LayerKind::dense:
        f = {static_cast<double>(size) * spec.units, true};
        shape = {spec.units};
        break;
      default:  // activations, dropout: shape unchanged
        break;
    }
    out.push_back(f);
  }
  return out;
}

// FLOP per training sample: forward, weight gradient and input gradient each cost 2 x MACs, except
// that layers before and including the first one with parameters need no input gradient.
double training_flops_per_sample(const std::vector<strata::LayerSpec>& layers,
                                 const strata::Shape& input) {
  double flops = 0.0;
  bool seen_params = false;
  for (const auto& f : forward_macs(layers, input)) {
    if (!f.has_params) continue;
    flops += 2.0 * f.macs * (seen_params ? 3.0 : 2.0);
    seen_params = true;
  }
  return flops;
}

// ---- sgemm ------------------------------------------------------------------------------------

// Median GFLOP/s of square n x n x n oneDNN sgemm on `threads` OpenMP threads.
double sgemm_gflops(int n, int threads, int calls) {
  omp_set_num_threads(threads);
  const auto elements = static_cast<std::size_t>(n) * static_cast<std::size_t>(n);
  std::vector<float> a(elements, 0.5f), b(elements, 0.25f), c(elements, 0.0f);
  auto once = [&] {
    const auto t0 = Clock::now();
    strata::sgemm(strata::Transpose::no, strata::Transpose::no, n, n, n, 1.0f, a.data(), n,
                  b.data(), n, 0.0f, c.data(), n);
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  once();  // first call: thread start-up and page faults
  std::vector<double> rates;
  for (int i = 0; i < calls; ++i)
    rates.push_back(2.0 * n * n * static_cast<double>(n) / once() * 1e-9);
  strata::configure_kernel_thread();  // as strata's workers run them
  return median(rates);
}

// ---- strata -----------------------------------------------------------------------------------

// Steady-state samples/s of each repeat, each repeat a whole number of epochs of about `seconds`.
// `between` runs before the first repeat and after each.
std::vector<double> measure_strata(const ModelCase& model, int batch,
                                   const strata::TrainingData& data, const Options& o,
                                   std::string& conv_impls, const std::function<void()>& between) {
  const strata::Config config = strata::bench::bench_config(model.layers, batch);
  strata::Trainer trainer(config, strata::build_model(config, data), data,
                          strata::standalone_plan(config), o.threads);
  int warm_epochs = 0;
  double last = 0.0, warm = 0.0;
  for (; warm < o.warmup_seconds || warm_epochs < 1; ++warm_epochs)
    warm += last = strata::bench::epoch_train_seconds(trainer, batch);
  conv_impls.clear();
  for (std::size_t i = 0; i < trainer.model().layer_count(); ++i)
    if (auto* conv = dynamic_cast<strata::Conv2DLayer*>(&trainer.model().layer(i)))
      conv_impls += fmt::format("{}{}: {}", conv_impls.empty() ? "" : ", ", conv->name(),
                                conv->implementation());
  const int epochs_per_repeat = std::max(1, static_cast<int>(std::lround(o.seconds / last)));
  const auto samples = static_cast<double>(trainer.steps_per_epoch() * batch * epochs_per_repeat);
  std::vector<double> rates;
  between();
  for (int r = 0; r < o.repeats; ++r) {
    double seconds = 0.0;
    for (int e = 0; e < epochs_per_repeat; ++e)
      seconds += strata::bench::epoch_train_seconds(trainer, batch);
    rates.push_back(samples / seconds);
    between();
  }
  return rates;
}

// ---- PyTorch ----------------------------------------------------------------------------------

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

// Fails before any measurement when the reference cannot run, rather than after the first strata
// row.
void check_torch(const Options& o) {
  const std::string command = shell_quote(o.python) + " -c 'import torch' 2>/dev/null";
  if (std::system(command.c_str()) != 0)
    throw std::runtime_error(
        fmt::format("{} cannot import torch; install it with jobs/install_deps.sh --with-torch "
                    "(or name another interpreter with --python)",
                    o.python));
}

// Runs torch_reference.py for `repeats` timed repeats of one row and returns its JSON result line.
nlohmann::json measure_torch(const std::string& model, int batch, int repeats, const Options& o) {
  const std::string command = fmt::format(
      "{} {} --model {} --batch {} --threads {} --seconds {} --warmup-seconds {} --repeats {} "
      "--samples {}",
      shell_quote(o.python), shell_quote(o.torch_script), model, batch, o.threads, o.seconds,
      o.warmup_seconds, repeats, o.train_samples);
  std::FILE* pipe = popen(command.c_str(), "r");
  if (!pipe) throw std::runtime_error("cannot start: " + command);
  std::string output;
  char buffer[4096];
  while (std::fgets(buffer, sizeof buffer, pipe)) output += buffer;
  const int status = pclose(pipe);
  const int code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  if (code == 127) throw std::runtime_error(fmt::format("cannot run {} (not found?)", o.python));
  if (code == 3)
    throw std::runtime_error(
        fmt::format("{} has no torch; install it with jobs/install_deps.sh --with-torch "
                    "(or name another interpreter with --python)",
                    o.python));
  if (code != 0)
    throw std::runtime_error(fmt::format("PyTorch reference failed (exit {}): {}", code, command));
  const auto start = output.rfind("\n{", output.size() >= 2 ? output.size() - 2 : 0);
  return nlohmann::json::parse(output.substr(start == std::string::npos ? 0 : start + 1));
}

// ---- the run ----------------------------------------------------------------------------------

std::vector<ModelCase> models(const Options& o) {
  using strata::LayerKind;
  const strata::Config cnn = strata::load_config(o.cnn_config);
  return {{"cnn", "CNN conv5x5x32-pool-conv5x5x64-pool-fc256-fc10", cnn.layers},
          {"mlp", "MLP 784-512-256-10", strata::bench::benchmark_mlp_layers()}};
}

using strata::cpu_model_name;
using strata::bench::env_or;

int run(const Options& o) {
  check_torch(o);
  const auto report = strata::kernel_report();
  fmt::print(stderr,
             "[bench] {}; oneDNN {} on {} (CPU: {}); PyTorch's OPENBLAS_CORETYPE={} "
             "OMP_WAIT_POLICY={}\n",
             cpu_model_name(), report.onednn_version, report.onednn_isa, report.cpu_best,
             env_or("OPENBLAS_CORETYPE", "(unset)"), env_or("OMP_WAIT_POLICY", "(unset)"));
  if (!report.warning.empty()) fmt::print(stderr, "warning: {}\n", report.warning);

  // sgemm's GFLOP/s on 1 thread and on --threads threads.
  const auto sgemm_now = [&o] {
    const double one = sgemm_gflops(o.sgemm_n, 1, 5);
    return std::pair{one, o.threads == 1 ? one : sgemm_gflops(o.sgemm_n, o.threads, 5)};
  };

  strata::SyntheticSpec spec;  // Fashion-MNIST's shape: 1x28x28, 10 classes
  spec.train = o.train_samples;
  spec.test = 64;  // run_epoch evaluates after each epoch, outside the timed steps; keep it cheap
  const strata::TrainingData data =
      strata::prepare_training_data(strata::make_synthetic(spec, 1), 0.0, 1);

  std::vector<Row> rows;
  std::string conv_impls, torch_version;
  double cnn_flops = 0.0, mlp_flops = 0.0;
  for (const auto& model : models(o)) {
    const double flops = training_flops_per_sample(model.layers, data.sample_shape);
    (model.key == "cnn" ? cnn_flops : mlp_flops) = flops;
    fmt::print(stderr, "[bench] {}: {:.2f} MFLOP per training sample\n", model.label, flops * 1e-6);
    for (int batch : o.batches) {
      Row row;
      row.key = model.key;
      row.model = model.label;
      row.batch = batch;
      std::string impls;
      std::vector<double> sgemm_1, sgemm_t;  // before the first repeat and after each
      row.strata_repeats = measure_strata(model, batch, data, o, impls, [&] {
        row.round_trip_ns.push_back(core_round_trip_ns());
        const auto [one, all] = sgemm_now();
        sgemm_1.push_back(one);
        sgemm_t.push_back(all);
        const auto torch = measure_torch(model.key, batch, 1, o);
        row.torch_repeats.push_back(torch.at("samples_per_s").get<double>());
        torch_version = torch.at("torch").get<std::string>();
      });
      std::vector<double> ratios;
      for (std::size_t r = 0; r < row.strata_repeats.size(); ++r) {
        // The faster of the two reference readings either side: a reading that dipped (the other
        // vCPU taken for a moment; one 2-thread sgemm reading at one thread's rate put a 77% row
        // at 98% with their mean) must not flatter the repeat between them.
        const auto faster_side = [r](const std::vector<double>& v) {
          return std::max(v[r], v[r + 1]);
        };
        row.share_1.push_back(row.strata_repeats[r] / faster_side(sgemm_1));
        row.share_t.push_back(row.strata_repeats[r] / faster_side(sgemm_t));
        ratios.push_back(row.strata_repeats[r] / faster_side(row.torch_repeats));
      }
      row.ratio = median(ratios);
      row.sgemm_1 = median(sgemm_1);
      row.sgemm_t = median(sgemm_t);
      fmt::print(stderr,
                 "[bench] sgemm n={} before the row's first repeat and after each: [{}] GFLOP/s on "
                 "1 thread, [{}] on {}\n",
                 o.sgemm_n, repeats_string(sgemm_1), repeats_string(sgemm_t), o.threads);
      if (!impls.empty()) conv_impls = impls;
      row.strata = median(row.strata_repeats);
      row.torch = median(row.torch_repeats);
      fmt::print(stderr,
                 "[bench] {} b{}: strata {} [{}], PyTorch {} [{}] samples/s, ratio {:.2f}; core "
                 "round trip before the first repeat and after each [{}] ns\n",
                 model.key, batch, grouped(row.strata), repeats_string(row.strata_repeats),
                 grouped(row.torch), repeats_string(row.torch_repeats), row.ratio,
                 repeats_string(row.round_trip_ns));
      rows.push_back(std::move(row));
    }
  }

  fmt::print(
      "Single-rank training, {} threads, SGD momentum 0.9, synthetic 1x28x28 data, median of {} "
      "repeats of about {:g} s; PyTorch {} with {} threads measured in the same run, one repeat "
      "before strata's first and after each (its median here; the ratio is the median over "
      "strata's repeats of each against the faster of the PyTorch repeats either side of it) "
      "(OPENBLAS_CORETYPE={} OMP_WAIT_POLICY={}).\n\n",
      o.threads, o.repeats, o.seconds, torch_version, o.threads,
      env_or("OPENBLAS_CORETYPE", "(unset)"), env_or("OMP_WAIT_POLICY", "(unset)"));
  fmt::print(
      "| model | batch | strata samples/s | PyTorch samples/s | ratio |\n| --- | --- | --- | --- | "
      "--- |\n");
  for (const auto& r : rows)
    fmt::print("| {} | {} | {} | {} | {:.2f} |\n", r.model, r.batch, grouped(r.strata),
               grouped(r.torch), r.ratio);
  if (rows.empty()) return 0;
  const auto [low_t, high_t] = std::minmax_element(
      rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.sgemm_t < b.sgemm_t; });
  fmt::print("\nsgemm (n={}), the median of each row's: {:.0f}-{:.0f} GFLOP/s on {} threads. ",
             o.sgemm_n, low_t->sgemm_t, high_t->sgemm_t, o.threads);
  fmt::print(
      "FLOP per training sample (forward + backward, no input gradient for the first layer): "
      "CNN {:.1f} M, MLP {:.2f} M.",
      cnn_flops * 1e-6, mlp_flops * 1e-6);
  for (const auto& r : rows) {
    if (r.key != "cnn") continue;
    const double gflops = r.strata * cnn_flops * 1e-9;
    // Both ceilings: oneDNN's own threading, and one single-threaded sgemm per worker, which is
    // how strata splits a batch (they differ most when other processes share the cores). Each is
    // the median over the repeats of the repeat's share of the faster sgemm reading either side.
    fmt::print(
        " CNN batch {}: {:.0f} GFLOP/s, {:.0f}% of the sgemm on {} threads (median {:.0f} "
        "GFLOP/s; {:.0f}% of {} x 1 thread).",
        r.batch, gflops, 100.0 * median(r.share_t) * cnn_flops * 1e-9, o.threads, r.sgemm_t,
        100.0 * median(r.share_1) * cnn_flops * 1e-9 / o.threads, o.threads);
  }
  fmt::print("\n\nCore-to-core round trip (ns) before each row's first repeat and after each ({}):",
             strata::bench::core_round_trip_legend);
  for (const auto& r : rows)
    fmt::print(" {} b{} [{}];", r.key, r.batch, repeats_string(r.round_trip_ns));
  fmt::print("\n\nKernels: oneDNN {} on {} (CPU {}); convolutions {}.\n", report.onednn_version,
             report.onednn_isa, report.cpu_best, conv_impls.empty() ? "(none)" : conv_impls);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "strata single-rank training benchmark against PyTorch (tests/bench/run_training_bench.sh "
      "runs it)"};
  app.add_option("--threads", o.threads, "worker threads for strata and PyTorch")
      ->check(CLI::PositiveNumber);
  app.add_option("--seconds", o.seconds, "length of one timed repeat")->check(CLI::PositiveNumber);
  app.add_option("--warmup-seconds", o.warmup_seconds,
                 "untimed training per row before the repeats");
  app.add_option("--repeats", o.repeats, "timed repeats per row; the median is reported")
      ->check(CLI::PositiveNumber);
  app.add_option("--train", o.train_samples, "synthetic training samples (one epoch)")
      ->check(CLI::PositiveNumber);
  app.add_option("--batches", o.batches, "batch sizes")->delimiter(',');
  app.add_option("--sgemm-n", o.sgemm_n, "edge of the square sgemm")->check(CLI::PositiveNumber);
  app.add_option("--cnn-config", o.cnn_config, "config whose layers are the CNN")
      ->check(CLI::ExistingFile);
  app.add_option("--python", o.python, "interpreter with torch")->envname("STRATA_TORCH_PYTHON");
  app.add_option("--torch-script", o.torch_script, "the PyTorch reference")
      ->check(CLI::ExistingFile);
  CLI11_PARSE(app, argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "strata_bench_training: {}\n", e.what());
    return 1;
  }
}
