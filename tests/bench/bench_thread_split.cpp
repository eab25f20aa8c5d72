// The benchmark MLP on 2 worker threads that split each dense layer's units (run.thread_split:
// units) against the same threads splitting the batch, in turns in one run: each repeat of one is
// paired with the repeat of the other next to it, and a core round trip before each pair says
// whether the host had the two vCPUs on one L3. Prints a Markdown table.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "core/cpu_kernels.hpp"
#include "core/dataset.hpp"
#include "core/trainer.hpp"
#include "core/training_data.hpp"
#include "tests/bench/bench_util.hpp"
#include "tests/bench/training_cases.hpp"

namespace {

using strata::bench::core_round_trip_ns;
using strata::bench::grouped;
using strata::bench::median;
using strata::bench::repeats_string;

struct Options {
  int threads = 2;
  double seconds = 2.0;  // per timed repeat
  int repeats = 7;
  int train_samples = 16384;
  std::vector<int> batches = {64, 256};
};

// A trainer of the MLP at `batch` on `split`, warmed up; `epochs` per repeat of about `seconds`.
struct Contender {
  strata::Config config;
  strata::Trainer trainer;
  int batch;
  int epochs = 1;
  std::vector<double> rates;

  Contender(strata::ThreadSplit split, int batch_size, const strata::TrainingData& data,
            const Options& o)
      : config(configured(split, batch_size)),
        trainer(config, strata::build_model(config, data), data, strata::standalone_plan(config),
                o.threads),
        batch(batch_size) {
    const double first = strata::bench::epoch_train_seconds(trainer, batch);
    epochs = std::max(1, static_cast<int>(std::lround(o.seconds / first)));
  }
  static strata::Config configured(strata::ThreadSplit split, int batch_size) {
    strata::Config c =
        strata::bench::bench_config(strata::bench::benchmark_mlp_layers(), batch_size);
    c.run.thread_split = split;
    return c;
  }
  void repeat() {
    double seconds = 0.0;
    for (int e = 0; e < epochs; ++e) seconds += strata::bench::epoch_train_seconds(trainer, batch);
    rates.push_back(static_cast<double>(trainer.steps_per_epoch() * batch * epochs) / seconds);
  }
};

int run(const Options& o) {
  strata::SyntheticSpec spec;  // Fashion-MNIST's shape: 1x28x28, 10 classes
  spec.train = o.train_samples;
  spec.test = 64;  // run_epoch evaluates after each epoch, outside the timed steps
  const strata::TrainingData data =
      strata::prepare_training_data(strata::make_synthetic(spec, 1), 0.0, 1);
  fmt::print(
      "MLP 784-512-256-10 on {} worker threads, SGD momentum 0.9, synthetic 1x28x28 data: the "
      "workers splitting each dense layer's units against splitting the batch, {} repeats of "
      "about {:g} s each, taking turns (the first of each pair alternates). The ratio is the "
      "median over the pairs; {}.\n\n",
      o.threads, o.repeats, o.seconds, strata::cpu_model_name());
  fmt::print(
      "| batch | units samples/s | batch samples/s | units / batch | pairs' ratios | core "
      "round trip before each pair (ns) |\n| --- | --- | --- | --- | --- | --- |\n");
  for (int batch : o.batches) {
    Contender units(strata::ThreadSplit::units, batch, data, o),
        whole(strata::ThreadSplit::batch, batch, data, o);
    if (!units.trainer.splits_units() || whole.trainer.splits_units())
      throw std::logic_error("the two trainers do not split as configured");
    std::vector<double> ratios, round_trips;
    for (int r = 0; r < o.repeats; ++r) {
      round_trips.push_back(core_round_trip_ns());
      if (r % 2 == 0) {
        units.repeat();
        whole.repeat();
      } else {
        whole.repeat();
        units.repeat();
      }
      ratios.push_back(units.rates.back() / whole.rates.back());
      fmt::print(stderr, "[bench] b{} pair {}: units {:.0f}, batch {:.0f} samples/s ({:.0f} ns)\n",
                 batch, r + 1, units.rates.back(), whole.rates.back(), round_trips.back());
    }
    std::vector<std::string> shown;
    for (double x : ratios) shown.push_back(fmt::format("{:.2f}", x));
    fmt::print("| {} | {} | {} | {:.2f} | {} | {} |\n", batch, grouped(median(units.rates)),
               grouped(median(whole.rates)), median(ratios), fmt::join(shown, " "),
               repeats_string(round_trips));
  }
  fmt::print("\nCore round trip: {}.\n", strata::bench::core_round_trip_legend);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{"strata's MLP on worker threads splitting the units against splitting the batch"};
  app.add_option("--threads", o.threads, "worker threads")->check(CLI::Range(2, 256));
  app.add_option("--seconds", o.seconds, "length of one timed repeat")->check(CLI::PositiveNumber);
  app.add_option("--repeats", o.repeats, "pairs of timed repeats")->check(CLI::PositiveNumber);
  app.add_option("--train", o.train_samples, "synthetic training samples (one epoch)")
      ->check(CLI::PositiveNumber);
  app.add_option("--batches", o.batches, "batch sizes")->delimiter(',');
  CLI11_PARSE(app, argc, argv);
  try {
    strata::configure_kernel_thread();
    return run(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "strata_bench_thread_split: {}\n", e.what());
    return 1;
  }
}
