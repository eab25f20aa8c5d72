// The per-step cost of model parallelism: the benchmark CNN with its second conv and its dense pair
// split over M=2 ranks (one thread each) against M=1 on one rank of one thread, the same batch,
// measured in one `mpiexec -n 2` launch, the two sides taking turns in every round. Rank 0 prints a
// table.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "core/config.hpp"
#include "core/cpu_kernels.hpp"
#include "core/trainer.hpp"
#include "parallel/communicator.hpp"
#include "parallel/model_parallel_layers.hpp"
#include "tests/bench/bench_util.hpp"

using namespace strata;

namespace {

using strata::bench::median;

void idle_barrier(const strata::Communicator& comm) {
  strata::bench::idle_barrier(comm.handle());
}

Config bench_config(int batch) {
  Config c = load_config(STRATA_SOURCE_DIR "/configs/fashion_cnn.yaml");
  c.data.source = DataSource::synthetic;
  c.data.validation_fraction = 0.0;
  c.data.synthetic = {2048, 64, 10, 1, 28, 28};
  c.training.local_batch = batch;
  c.training.schedule = {};
  c.training.epochs = 1 << 20;  // keeps the schedule's bookkeeping in range over many epochs
  for (auto& layer : c.layers) {
    if (layer.name == "conv2d_3" || layer.name == "dense_7") layer.split = SplitKind::column;
    if (layer.name == "dense_9") layer.split = SplitKind::row;
  }
  return c;
}

// Milliseconds per training step over one epoch (evaluation excluded).
double step_ms(Trainer& trainer, int /*epoch*/) {
  const EpochMetrics m = trainer.run_epoch({});
  return 1000.0 * static_cast<double>(trainer.global_batch()) / m.samples_per_s;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  {
    const Communicator world = Communicator::world();
    const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
    std::string table =
        "| batch | M=1, 1 rank: ms/step | M=2, 2 ranks: ms/step | M=2 / M=1 | split layers' "
        "weights per rank |\n"
        "| --- | --- | --- | --- | --- |\n";
    for (int batch : {64, 256}) {
      const Config config = bench_config(batch);
      const TrainingData data = load_training_data(config);
      std::optional<Trainer> single;
      if (world.rank() == 0)
        single.emplace(config, build_model(config, data), data, standalone_plan(config), 1);
      Trainer split(config, build_model(config, data, model_parallel_factory(world, config.file)),
                    data, standalone_plan(config), 1);
      std::vector<double> one, two;
      for (int round = 0; round <= rounds; ++round) {  // round 0 warms up
        if (world.rank() == 0) {
          const double ms = step_ms(*single, round + 1);
          if (round > 0) one.push_back(ms);
        }
        idle_barrier(world);
        const double ms = step_ms(split, round + 1);
        if (round > 0) two.push_back(world.allreduce_sum_double(ms) / world.size());
        world.barrier();
      }
      std::int64_t single_split = 0, shard_split = 0;
      if (world.rank() == 0) {
        auto a = single->model().params(), b = split.model().params();
        for (std::size_t k = 0; k < a.size(); ++k)
          if (a[k].value->size() != b[k].value->size()) {
            single_split += a[k].value->size() * 4;
            shard_split += b[k].value->size() * 4;
          }
        table +=
            fmt::format("| {} | {:.2f} | {:.2f} | {:.2f} | {} of {} bytes |\n", batch, median(one),
                        median(two), median(two) / median(one), shard_split, single_split);
      }
    }
    if (world.rank() == 0)
      fmt::print(
          "benchmark CNN, conv2d_3 and dense_7 split by column, dense_9 by row; {} ranks, one "
          "thread "
          "each; "
          "median of {} rounds; oneDNN on {}\n\n{}",
          world.size(), rounds, kernel_report().onednn_isa, table);
  }
  MPI_Finalize();
  return 0;
}
