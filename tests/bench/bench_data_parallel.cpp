// Data-parallel scaling efficiency of the benchmark CNN: 2 ranks of one thread each against 1 rank
// of one thread, the global batch held fixed. tests/bench/run_dp_bench.sh runs it under mpiexec
// -n 2.
//
// Both sides are measured in the same launch, taking turns in every round so that the machine's
// drift touches them alike:
//   reference: rank 0 alone trains with Trainer(threads=1), no GradientSync, batch G, while rank 1
//              waits idle (a non-blocking barrier polled with sleeps, so it does not spin on a
//              core);
//   parallel:  both ranks train with Trainer(threads=1) and a gradient sync over the 2 ranks
//              (DataParallelSync, or HierarchicalSync with --allreduce hierarchical), local batch
//              G/2 each, global batch G;
//   half:      a diagnostic: rank 0 alone trains batch G/2 with no sync, rank 1 idle. Its step
//              time is the parallel step's compute with neither communication nor a busy
//              neighbour core, so parallel step - half step is what running together costs;
//   both halves: a diagnostic: both ranks train batch G/2 at once with no sync (the slower rank
//              counts): the parallel step's compute on a shared machine, so that running
//              together splits into sharing the machine (both - half) and the sync (parallel -
//              both).
// Samples/s count training steps only (EpochMetrics::samples_per_s, evaluation excluded); the
// parallel side counts the slower rank. Progress goes to stderr; rank 0 prints a Markdown table.
#include <mpi.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include "core/config.hpp"
#include "core/cpu_kernels.hpp"
#include "core/dataset.hpp"
#include "core/trainer.hpp"
#include "core/training_data.hpp"
#include "parallel/communicator.hpp"
#include "parallel/gradient_sync.hpp"
#include "parallel/hierarchical_sync.hpp"
#include "tests/bench/bench_util.hpp"
#include "tests/bench/training_cases.hpp"

namespace {

using strata::bench::core_round_trip_ns;
using strata::bench::grouped;
using strata::bench::median;

void idle_barrier(const strata::Communicator& comm) {
  strata::bench::idle_barrier(comm.handle());
}
using strata::bench::repeats_string;

using strata::Communicator;

struct Options {
  double seconds = 2.0;         // per timed repeat and side
  double warmup_seconds = 1.0;  // per batch size and side, before the repeats
  int repeats = 5;
  int train_samples = 4096;
  double bucket_mib = 25.0;  // parallel.bucket_mib's default
  // The shared-window sum: what parallel.allreduce: auto takes for 2 replicas on one node.
  bool hierarchical = true;
  std::vector<int> batches{64, 256};
  std::string cnn_config = STRATA_SOURCE_DIR "/configs/fashion_cnn.yaml";
};

struct Row {
  int batch = 0;
  double one_rank = 0.0, two_ranks = 0.0, half = 0.0;  // median samples/s
  // Both ranks training G/2 at once with no sync, the slower rank's rate: the parallel step's
  // compute with the machine shared as the 2-rank run shares it.
  double both_halves = 0.0;
  std::vector<double> both_halves_repeats;
  std::vector<double> one_rank_repeats, two_ranks_repeats, half_repeats;
  std::size_t buckets = 0;
  // Rank 0's core-to-core round trip before each repeat, rank 1 asleep: whether the host had the
  // two vCPUs on one L3, which the shared-window sum (every gradient crossing between the cores)
  // feels.
  std::vector<double> round_trip_ns;
};

void check(int rc, const char* op) {
  if (rc != MPI_SUCCESS) throw std::runtime_error(fmt::format("{} failed (code {})", op, rc));
}

double allreduce_max(const Communicator& comm, double value) {
  double out = 0.0;
  check(MPI_Allreduce(&value, &out, 1, MPI_DOUBLE, MPI_MAX, comm.handle()), "MPI_Allreduce");
  return out;
}

strata::Config bench_config(const std::vector<strata::LayerSpec>& layers, int local_batch) {
  strata::Config config = strata::bench::bench_config(layers, local_batch);
  config.file = "bench_data_parallel";
  config.parallel.lr_scaling = strata::LrScaling::none;  // the same update on both sides
  return config;
}

// Seconds of training steps in one epoch (run_epoch times the steps alone, then evaluates).
double epoch_train_seconds(strata::Trainer& trainer, int /*epoch*/) {
  const strata::EpochMetrics m = trainer.run_epoch({});
  return static_cast<double>(trainer.steps_per_epoch() * trainer.global_batch()) / m.samples_per_s;
}

// One batch size: the reference on rank 0 and the 2-rank data-parallel run, taking turns.
Row measure(const Communicator& world, const std::vector<strata::LayerSpec>& layers, int batch,
            const strata::TrainingData& data, const Options& o) {
  // The hierarchical sum's node as MPI sees it (this benchmark runs on one).
  const Communicator node = world.split_shared("node");
  const Communicator across = world.split(node.rank(), world.rank(), "across");
  const bool root = world.rank() == 0;
  const strata::Config reference_config = bench_config(layers, batch);
  const strata::Config parallel_config = bench_config(layers, batch / 2);

  std::optional<strata::Trainer> reference;  // rank 0 only
  if (root)
    reference.emplace(reference_config, strata::build_model(reference_config, data), data,
                      strata::standalone_plan(reference_config), 1);
  // G/2 with no sync: on rank 0 alone, and on both ranks at once.
  strata::Trainer half(parallel_config, strata::build_model(parallel_config, data), data,
                       strata::standalone_plan(parallel_config), 1);
  std::optional<strata::DataParallelSync> mpi_sync;
  std::optional<strata::HierarchicalSync> shared_sync;
  strata::GradientSync* sync = nullptr;
  if (o.hierarchical)
    sync = &shared_sync.emplace(world, node, across);
  else
    sync = &mpi_sync.emplace(world, o.bucket_mib);
  strata::Trainer parallel(parallel_config, strata::build_model(parallel_config, data), data,
                           strata::standalone_plan(parallel_config, sync->replicas()), 1, sync);
  if (shared_sync) shared_sync->attach(parallel.model().params());
  if (mpi_sync) mpi_sync->attach(parallel.model().params());
  if (parallel.global_batch() != batch || (root && reference->global_batch() != batch))
    throw std::logic_error("the two sides do not train the same global batch");

  Row row;
  row.batch = batch;
  row.buckets = mpi_sync ? mpi_sync->bucket_count() : 1;
  if (root)
    fmt::print(
        stderr,
        "[bench] batch {}: {} steps per epoch; {} gradient bucket(s); OpenMP max threads {}\n",
        batch, parallel.steps_per_epoch(), row.buckets, omp_get_max_threads());

  // Warm-up: whole epochs until warmup_seconds, on each side; it also sizes the repeats.
  int reference_epoch = 0, parallel_epoch = 0, half_epoch = 0;
  double reference_last = 0.0, parallel_last = 0.0, half_last = 0.0;
  idle_barrier(world);
  if (root) {
    for (double warm = 0.0; warm < o.warmup_seconds || reference_epoch < 1;)
      warm += reference_last = epoch_train_seconds(*reference, ++reference_epoch);
    for (double warm = 0.0; warm < o.warmup_seconds || half_epoch < 1;)
      warm += half_last = epoch_train_seconds(half, ++half_epoch);
  }
  idle_barrier(world);
  for (double warm = 0.0; warm < o.warmup_seconds || parallel_epoch < 1;) {
    // Every rank must run the same number of epochs: go on while any rank wants to.
    warm = allreduce_max(world,
                         warm + (parallel_last = epoch_train_seconds(parallel, ++parallel_epoch)));
  }
  idle_barrier(world);
  epoch_train_seconds(half, ++half_epoch);  // rank 1's warm-up of it, both at once
  parallel_last = allreduce_max(world, parallel_last);
  reference_last = allreduce_max(world, reference_last);  // rank 1 contributes 0
  half_last = allreduce_max(world, half_last);
  const int reference_epochs =
      std::max(1, static_cast<int>(std::lround(o.seconds / reference_last)));
  const int half_epochs = std::max(1, static_cast<int>(std::lround(o.seconds / half_last)));
  const int parallel_epochs = std::max(1, static_cast<int>(std::lround(o.seconds / parallel_last)));

  const auto samples = static_cast<double>(parallel.steps_per_epoch() * batch);
  for (int r = 0; r < o.repeats; ++r) {
    idle_barrier(world);
    double seconds = 0.0;
    if (root) {
      row.round_trip_ns.push_back(core_round_trip_ns());
      for (int e = 0; e < reference_epochs; ++e)
        seconds += epoch_train_seconds(*reference, ++reference_epoch);
      row.one_rank_repeats.push_back(samples * reference_epochs / seconds);
      seconds = 0.0;
      for (int e = 0; e < half_epochs; ++e) seconds += epoch_train_seconds(half, ++half_epoch);
      row.half_repeats.push_back(samples * half_epochs / seconds);  // G/2 x twice the steps
    }
    idle_barrier(world);  // rank 1 sleeps here while rank 0 trains alone
    seconds = 0.0;
    for (int e = 0; e < half_epochs; ++e) seconds += epoch_train_seconds(half, ++half_epoch);
    seconds = allreduce_max(world, seconds);
    row.both_halves_repeats.push_back(samples * half_epochs / seconds);
    idle_barrier(world);
    seconds = 0.0;
    for (int e = 0; e < parallel_epochs; ++e)
      seconds += epoch_train_seconds(parallel, ++parallel_epoch);
    seconds = allreduce_max(world, seconds);  // the slower rank
    row.two_ranks_repeats.push_back(samples * parallel_epochs / seconds);
    if (root)
      fmt::print(stderr,
                 "[bench] batch {} repeat {}: 1 rank {:.0f}, 2 ranks {:.0f}, 1 rank at G/2 {:.0f}, "
                 "both at G/2 {:.0f} samples/s; core round trip before it {:.0f} ns\n",
                 batch, r + 1, row.one_rank_repeats.back(), row.two_ranks_repeats.back(),
                 row.half_repeats.back(), row.both_halves_repeats.back(), row.round_trip_ns.back());
  }
  if (root) {
    row.one_rank = median(row.one_rank_repeats);
    row.half = median(row.half_repeats);
  }
  row.both_halves = median(row.both_halves_repeats);
  row.two_ranks = median(row.two_ranks_repeats);
  return row;
}

using strata::cpu_model_name;
using strata::bench::env_or;

int run(const Communicator& world, const Options& o) {
  if (world.size() != 2)
    throw std::runtime_error(
        fmt::format("needs exactly 2 ranks (mpiexec -n 2), got {}", world.size()));
  for (int batch : o.batches)
    if (batch < 2 || batch % 2 != 0)
      throw std::runtime_error(fmt::format("global batch {} does not split over 2 ranks", batch));
  const bool root = world.rank() == 0;
  const auto report = strata::kernel_report();
  if (root) {
    fmt::print(stderr, "[bench] {}; {} cores online; oneDNN {} on {} (CPU: {})\n", cpu_model_name(),
               std::thread::hardware_concurrency(), report.onednn_version, report.onednn_isa,
               report.cpu_best);
    if (!report.warning.empty()) fmt::print(stderr, "warning: {}\n", report.warning);
  }

  const std::vector<strata::LayerSpec> layers = strata::load_config(o.cnn_config).layers;
  strata::SyntheticSpec spec;  // Fashion-MNIST's shape: 1x28x28, 10 classes
  spec.train = o.train_samples;
  spec.test = 64;  // run_epoch evaluates after each epoch, outside the timed steps; keep it cheap
  const strata::TrainingData data =
      strata::prepare_training_data(strata::make_synthetic(spec, 1), 0.0, 1);

  std::vector<Row> rows;
  for (int batch : o.batches) rows.push_back(measure(world, layers, batch, data, o));
  if (!root) return 0;

  for (const auto& r : rows)
    fmt::print(stderr,
               "[bench] batch {}: 1 rank [{}], 2 ranks [{}], 1 rank at G/2 [{}] samples/s\n",
               r.batch, repeats_string(r.one_rank_repeats), repeats_string(r.two_ranks_repeats),
               repeats_string(r.half_repeats));
  fmt::print(
      "Data-parallel scaling of the benchmark CNN (layers of {}), global batch fixed: 1 rank x 1 "
      "thread (batch G) against 2 ranks x 1 thread (local batch G/2, {}), in one mpiexec -n 2 "
      "launch, the sides taking turns; synthetic 1x28x28 data, {} samples per epoch, SGD momentum "
      "0.9; median of {} repeats of about {:g} s, training steps only. oneDNN on {} (CPU {}).\n\n",
      "configs/fashion_cnn.yaml",
      o.hierarchical ? "parallel.allreduce: hierarchical, one sum per step through a shared window"
                     : fmt::format("DataParallelSync over MPI, bucket_mib {:g}", o.bucket_mib),
      o.train_samples, o.repeats, o.seconds, report.onednn_isa, report.cpu_best);
  fmt::print(
      "| global batch | 1 rank samples/s | 2 ranks samples/s | speedup | efficiency |\n"
      "| --- | --- | --- | --- | --- |\n");
  for (const auto& r : rows) {
    const double speedup = r.two_ranks / r.one_rank;
    fmt::print("| {} | {} | {} | {:.2f} | {:.2f} |\n", r.batch, grouped(r.one_rank),
               grouped(r.two_ranks), speedup, speedup / 2.0);
  }
  if (!o.hierarchical)
    fmt::print(
        "\nGradient buckets per step: {} ({:g} MiB buckets; gradients of 64 KiB or more in "
        "their own).\n",
        rows.empty() ? 0 : rows.front().buckets, o.bucket_mib);
  // Where a parallel step's time goes: its half-batch compute alone (rank 1 idle), and the rest.
  fmt::print(
      "\nStep times (medians): 1 rank at G; 1 rank alone at G/2 (rank 1 idle, no sync: the "
      "parallel step's compute); 2 ranks at G/2 each; overhead = 2-rank step - G/2 step "
      "(gradient allreduce, statistics sum, and the two ranks sharing the machine), split into "
      "sharing = both ranks at G/2 at once with no sync (the slower one) - G/2 step, and sync = "
      "2-rank step - both at once; sync efficiency = both at once / 2-rank step.\n\n"
      "| global batch | 1 rank step ms | 1 rank, G/2, step ms | both at G/2, no sync, step ms | 2 "
      "ranks step ms | overhead ms | sharing ms | sync ms | sync efficiency |\n"
      "| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (const auto& r : rows) {
    const double g = r.batch;
    const double one = 1e3 * g / r.one_rank, half = 1e3 * 0.5 * g / r.half,
                 both = 1e3 * 0.5 * g / r.both_halves, two = 1e3 * g / r.two_ranks;
    fmt::print("| {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} |\n",
               r.batch, one, half, both, two, two - half, both - half, two - both, both / two);
  }
  fmt::print("\nCore-to-core round trip (ns) before each repeat ({}):",
             strata::bench::core_round_trip_legend);
  for (const auto& r : rows)
    fmt::print(" batch {} [{}];", r.batch, repeats_string(r.round_trip_ns));
  fmt::print("\n");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  Options o;
  CLI::App app{
      "strata data-parallel scaling benchmark, 2 ranks against 1 (tests/bench/run_dp_bench.sh "
      "runs it under mpiexec -n 2)"};
  app.add_option("--seconds", o.seconds, "length of one timed repeat, per side")
      ->check(CLI::PositiveNumber);
  app.add_option("--warmup-seconds", o.warmup_seconds,
                 "untimed training per batch size and side before the repeats");
  app.add_option("--repeats", o.repeats, "timed repeats per batch size; the median is reported")
      ->check(CLI::PositiveNumber);
  app.add_option("--train", o.train_samples, "synthetic training samples (one epoch)")
      ->check(CLI::PositiveNumber);
  app.add_option("--bucket-mib", o.bucket_mib, "gradient allreduce bucket size (0: one per tensor)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--batches", o.batches, "global batch sizes (even)")->delimiter(',');
  app.add_option("--allreduce", o.hierarchical,
                 "the gradient sum: hierarchical (what auto takes on one node) or mpi")
      ->transform(CLI::CheckedTransformer(
          std::map<std::string, bool>{{"mpi", false}, {"hierarchical", true}}));
  app.add_option("--cnn-config", o.cnn_config, "config whose layers are the CNN")
      ->check(CLI::ExistingFile);
  int code = 0;
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    code = app.exit(e);  // every rank parses the same arguments and leaves alike
    MPI_Finalize();
    return code;
  }
  try {
    const Communicator world = Communicator::world();
    code = run(world, o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "strata_bench_data_parallel: {}\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);  // the other rank may be waiting in a collective
  }
  MPI_Finalize();
  return code;
}
