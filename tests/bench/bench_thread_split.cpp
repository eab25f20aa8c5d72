// How 2 worker threads share a training step, two ways against each other in turns in one run
// (each repeat of one paired with the repeat of the other next to it, a core round trip before
// each pair saying whether the host had the two vCPUs on one L3), as Markdown tables:
// - the benchmark MLP with the workers splitting each dense layer's units (run.thread_split:
//   units) against splitting the batch;
// - the benchmark CNN with the workers taking the optimizer step as their backward passes finish
//   it against one step after backward (a trainer with a sync for one replica steps after it).
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "core/cpu_kernels.hpp"
#include "core/dataset.hpp"
#include "core/trainer.hpp"
#include "core/training_data.hpp"
#include "tests/bench/bench_util.hpp"
#include "tests/bench/training_cases.hpp"
#include "tests/core/one_replica_sync.hpp"

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
  std::string cnn_config = STRATA_SOURCE_DIR "/configs/fashion_cnn.yaml";
};

// A trainer of `config` (its batch: training.local_batch), warmed up; `epochs` per repeat of
// about `seconds`. `sync`: null, or one for a single replica.
struct Contender {
  strata::Config config;
  strata::Trainer trainer;
  int batch;
  int epochs = 1;
  std::vector<double> rates;

  Contender(strata::Config c, const strata::TrainingData& data, const Options& o,
            strata::GradientSync* sync = nullptr)
      : config(std::move(c)),
        trainer(config, strata::build_model(config, data), data, strata::standalone_plan(config),
                o.threads, sync),
        batch(config.training.local_batch) {
    const double first = strata::bench::epoch_train_seconds(trainer, batch);
    epochs = std::max(1, static_cast<int>(std::lround(o.seconds / first)));
  }
  void repeat() {
    double seconds = 0.0;
    for (int e = 0; e < epochs; ++e) seconds += strata::bench::epoch_train_seconds(trainer, batch);
    rates.push_back(static_cast<double>(trainer.steps_per_epoch() * batch * epochs) / seconds);
  }
};

// One table row: `a` against `b` in o.repeats pairs, the first of each pair alternating.
void compare(Contender& a, Contender& b, const char* a_name, const char* b_name, const Options& o) {
  std::vector<double> ratios, round_trips;
  for (int r = 0; r < o.repeats; ++r) {
    round_trips.push_back(core_round_trip_ns());
    if (r % 2 == 0) {
      a.repeat();
      b.repeat();
    } else {
      b.repeat();
      a.repeat();
    }
    ratios.push_back(a.rates.back() / b.rates.back());
    fmt::print(stderr, "[bench] b{} pair {}: {} {:.0f}, {} {:.0f} samples/s ({:.0f} ns)\n", a.batch,
               r + 1, a_name, a.rates.back(), b_name, b.rates.back(), round_trips.back());
  }
  std::vector<std::string> shown;
  for (double x : ratios) shown.push_back(fmt::format("{:.2f}", x));
  fmt::print("| {} | {} | {} | {:.3f} | {} | {} |\n", a.batch, grouped(median(a.rates)),
             grouped(median(b.rates)), median(ratios), fmt::join(shown, " "),
             repeats_string(round_trips));
}

strata::Config mlp_config(strata::ThreadSplit split, int batch) {
  strata::Config c = strata::bench::bench_config(strata::bench::benchmark_mlp_layers(), batch);
  c.run.thread_split = split;
  return c;
}

int run(const Options& o) {
  strata::SyntheticSpec spec;  // Fashion-MNIST's shape: 1x28x28, 10 classes
  spec.train = o.train_samples;
  spec.test = 64;  // run_epoch evaluates after each epoch, outside the timed steps
  const strata::TrainingData data =
      strata::prepare_training_data(strata::make_synthetic(spec, 1), 0.0, 1);
  fmt::print(
      "How {} worker threads share a step, SGD momentum 0.9, synthetic 1x28x28 data: {} pairs of "
      "repeats of about {:g} s each, taking turns (the first of each pair alternates). The ratio "
      "is the median over the pairs; {}.\n\n",
      o.threads, o.repeats, o.seconds, strata::cpu_model_name());
  fmt::print(
      "MLP 784-512-256-10, the workers splitting each dense layer's units against splitting the "
      "batch:\n\n| batch | units samples/s | batch samples/s | units / batch | pairs' ratios | "
      "core round trip before each pair (ns) |\n| --- | --- | --- | --- | --- | --- |\n");
  for (int batch : o.batches) {
    Contender units(mlp_config(strata::ThreadSplit::units, batch), data, o),
        whole(mlp_config(strata::ThreadSplit::batch, batch), data, o);
    if (!units.trainer.splits_units() || whole.trainer.splits_units())
      throw std::logic_error("the two trainers do not split as configured");
    compare(units, whole, "units", "batch", o);
  }
  const strata::Config cnn = strata::load_config(o.cnn_config);
  fmt::print(
      "\nThe CNN of {}, the workers splitting the batch and taking the optimizer step as their "
      "backward passes finish it, against one step after backward:\n\n| batch | during "
      "samples/s | after samples/s | during / after | pairs' ratios | core round trip before "
      "each pair (ns) |\n| --- | --- | --- | --- | --- | --- |\n",
      o.cnn_config.substr(o.cnn_config.rfind('/') + 1));
  for (int batch : o.batches) {
    strata::testing::OneReplicaSync one_replica;
    const strata::Config config = strata::bench::bench_config(cnn.layers, batch);
    Contender during(config, data, o), after(config, data, o, &one_replica);
    if (!during.trainer.steps_during_backward() || after.trainer.steps_during_backward())
      throw std::logic_error("the two trainers do not step as they should");
    compare(during, after, "during", "after", o);
  }
  fmt::print("\nCore round trip: {}.\n", strata::bench::core_round_trip_legend);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "how strata's worker threads share a step: the MLP's units split against the batch "
      "split, and the CNN's optimizer step during backward against after it"};
  app.add_option("--threads", o.threads, "worker threads")->check(CLI::Range(2, 256));
  app.add_option("--seconds", o.seconds, "length of one timed repeat")->check(CLI::PositiveNumber);
  app.add_option("--repeats", o.repeats, "pairs of timed repeats")->check(CLI::PositiveNumber);
  app.add_option("--train", o.train_samples, "synthetic training samples (one epoch)")
      ->check(CLI::PositiveNumber);
  app.add_option("--batches", o.batches, "batch sizes")->delimiter(',');
  app.add_option("--cnn-config", o.cnn_config, "the config whose layers the CNN rows train")
      ->check(CLI::ExistingFile);
  CLI11_PARSE(app, argc, argv);
  try {
    strata::configure_kernel_thread();
    return run(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "strata_bench_thread_split: {}\n", e.what());
    return 1;
  }
}
