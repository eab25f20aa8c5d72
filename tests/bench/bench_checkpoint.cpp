// Checkpoint cost, measured the way `strata run` checkpoints (TrainingSession): on one rank a state
// snapshot and the HDF5 file written in the background; with M = 2 every shard writing its own
// slices of the one file in the background too. The write is waited for right after the
// snapshot, so the step time does not show what the writer threads take from training:
//   - write MB/s, snapshot to durable file (fsync and rename included), against `dd conv=fsync` of
//     the same bytes to the same directory;
//   - read MB/s of read_checkpoint (every checksum verified) against `dd` reading the file;
//   - the training pause per checkpoint, against the step time, and as a share of training time
//     at one checkpoint a minute.
// Usage: strata_bench_checkpoint cnn DIR [ROUNDS]          (1 rank: the Fashion CNN)
//        mpiexec -n 2 strata_bench_checkpoint big DIR [ROUNDS]   (a ~100M-parameter MLP, M=2)
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/checkpoint_file.hpp"
#include "core/trainer.hpp"
#include "jobs/training_session.hpp"
#include "parallel/model_parallel_layers.hpp"
#include "parallel/planner.hpp"
#include "tests/bench/bench_util.hpp"

using namespace strata;
using Clock = std::chrono::steady_clock;

namespace {

double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The Fashion CNN of configs/fashion_cnn.yaml (317 066 parameters, SGD with momentum).
const char* const cnn_yaml = R"(run: {name: bench_cnn, seed: 1, threads: 1}
data: {source: synthetic, synthetic: {train: 8192, test: 64, classes: 10, channels: 1, height: 28, width: 28}}
model:
  layers:
    - conv2d: {filters: 32, kernel: 5, init: glorot}
    - relu
    - maxpool2d: {size: 2}
    - conv2d: {filters: 64, kernel: 5, init: glorot}
    - relu
    - maxpool2d: {size: 2}
    - flatten
    - dense: {units: 256, init: glorot}
    - relu
    - dense: {units: 10, init: glorot}
training: {epochs: 1000, local_batch: 64, optimizer: {type: sgd, lr: 0.01, momentum: 0.9}}
)";

// 101.6 million parameters in two column -> row pairs, split over M=2 shards, with Adam: a 1.2 GB
// checkpoint (weights and both moments).
const char* const big_yaml = R"(run: {name: bench_big, seed: 1, threads: 1}
data: {source: synthetic, synthetic: {train: 4096, test: 64, classes: 10, channels: 1, height: 28, width: 28}}
model:
  layers:
    - flatten
    - dense: {units: 12288, init: glorot, split: column}
    - relu
    - dense: {units: 4096, init: glorot, split: row}
    - relu
    - dense: {units: 8192, init: glorot, split: column}
    - relu
    - dense: {units: 1024, init: glorot, split: row}
    - relu
    - dense: {units: 10, init: glorot}
training: {epochs: 1000, local_batch: 32, optimizer: {type: adam, lr: 0.0001}}
parallel: {model: 2, max_global_batch: 32}
)";

// Seconds `command` takes through the shell.
double shell_seconds(const std::string& command) {
  const auto t0 = Clock::now();
  if (std::system(command.c_str()) != 0) fmt::print(stderr, "warning: '{}' failed\n", command);
  return since(t0);
}

struct StopAfter {};

// Drops the page cache, so that a read comes from the disk as it does in a new allocation; false
// where that is not allowed (not root) or STRATA_BENCH_KEEP_PAGE_CACHE is set (the test suite's
// run, which should not empty the machine's cache under the other tests), and the reads then
// come from memory.
bool drop_page_cache() {
  if (std::getenv("STRATA_BENCH_KEEP_PAGE_CACHE") != nullptr) return false;
  std::ofstream drop("/proc/sys/vm/drop_caches");
  if (!drop) return false;
  drop << "1\n";
  drop.close();
  return !drop.fail();
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  {
    const std::string which = argc > 1 ? argv[1] : "cnn";
    const std::filesystem::path dir = argc > 2 ? argv[2] : "/tmp/strata-bench-checkpoint";
    const int rounds = argc > 3 ? std::atoi(argv[3]) : 5;
    const Communicator world = Communicator::world();
    const Config config = parse_config(which == "big" ? big_yaml : cnn_yaml, which + ".yaml");
    PlanRequest request;
    request.world_size = world.size();
    request.local_batch = config.training.local_batch;
    request.max_global_batch = config.training.local_batch;
    request.fixed_model = config.parallel.model;
    const Plan plan = make_plan(request);
    const Topology topology(world, plan);
    const TrainingData data = load_training_data(config);
    Trainer trainer(config,
                    build_model(config, data,
                                plan.model > 1 ? model_parallel_factory(topology.model(), "big")
                                               : LayerFactory{}),
                    data, plan, 1);
    const bool root = world.rank() == 0;
    if (root) std::filesystem::create_directories(dir);
    world.barrier();
    SessionSettings settings;
    settings.checkpoint_dir = dir / which;
    settings.checkpoint.keep = 2;
    TrainingSession session(trainer, topology, nullptr, settings);

    // Step times: a few steps, stopped by a hook that counts them.
    std::vector<double> step_seconds;
    auto train_steps = [&](int steps) {
      int done = 0;
      auto last = Clock::now();
      trainer.set_step_hook([&] {
        step_seconds.push_back(since(last));
        last = Clock::now();
        if (++done == steps) throw StopAfter{};
      });
      try {
        while (true) trainer.run_epoch({});
      } catch (const StopAfter&) {
      }
    };
    train_steps(3);  // warm-up
    step_seconds.clear();

    std::vector<double> pauses, writes, dd_writes, reads, dd_reads;
    std::size_t bytes = 0;
    bool cold = false;
    for (int round = 0; round < rounds; ++round) {
      // dd writes the same bytes before strata's write in odd rounds and after it in even ones, so
      // that neither always finds the disk busy with the other's write-back.
      const std::string dd_file = (dir / "dd.bin").string();
      auto dd_write = [&] {
        dd_writes.push_back(shell_seconds(fmt::format(
            "dd if=/dev/zero of={} bs=1M count={} conv=fsync status=none", dd_file, bytes >> 20)));
        std::filesystem::remove(dd_file);
      };
      if (root && round % 2 == 1) dd_write();
      train_steps(3);
      world.barrier();
      const auto t0 = Clock::now();
      session.checkpoint();
      // Rank 0's pause: the snapshot (with M = 2 also the file's frame; shard 0 records the
      // slices' checksums and names the file in finish(), after it).
      const double pause = since(t0);
      session.wait();
      world.barrier();
      writes.push_back(since(t0));
      if (!root) continue;
      pauses.push_back(pause);
      const auto files = CheckpointStore(settings.checkpoint_dir, 2).list();
      bytes = std::filesystem::file_size(files.back());
      if (round % 2 == 0) dd_write();
      cold = drop_page_cache();
      const auto r0 = Clock::now();
      const StateDict state = read_checkpoint(files.back().string());
      reads.push_back(since(r0));
      cold = drop_page_cache() && cold;
      dd_reads.push_back(shell_seconds(
          fmt::format("dd if={} of=/dev/null bs=1M status=none", files.back().string())));
    }
    // What the background write takes from training: the mean step over a window of steps
    // trained right after a checkpoint began (its write mostly in flight), against the same
    // window with no write, taking turns.
    const double step_alone = bench::median(step_seconds);
    // Every rank trains the same number of steps: the window is agreed on, not each rank's own.
    const int window =
        world.allreduce_max(std::max(4, static_cast<int>(std::ceil(2.0 / step_alone))));
    std::vector<double> alone, writing;
    auto window_mean = [&] {
      step_seconds.clear();
      train_steps(window);
      double sum = 0.0;
      for (const double s : step_seconds) sum += s;
      return sum / static_cast<double>(step_seconds.size());
    };
    for (int round = 0; round < rounds; ++round) {
      world.barrier();
      alone.push_back(window_mean());
      world.barrier();
      session.checkpoint();
      writing.push_back(window_mean());
      session.wait();
    }
    if (root) {
      const double mb = static_cast<double>(bytes) / 1e6, step = step_alone;
      const double pause = bench::median(pauses);
      const double write = mb / bench::median(writes), dd_write = mb / bench::median(dd_writes);
      const double read = mb / bench::median(reads), dd_read = mb / bench::median(dd_reads);
      fmt::print(
          "{} ({} rank(s), M = {}): checkpoint {:.1f} MB, {}; medians of {} rounds; reads {}\n",
          which, world.size(), plan.model, mb, bench::cpu_model_name(), rounds,
          cold ? "from the disk (page cache dropped)"
               : "from the page cache (not root, or STRATA_BENCH_KEEP_PAGE_CACHE)");
      fmt::print(
          "| model | checkpoint MB | write MB/s | dd write MB/s | ratio | read MB/s | dd read MB/s "
          "| ratio "
          "| pause s | step s | pause / step | pause at 1/min |\n"
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n");
      fmt::print(
          "| {} | {:.1f} | {:.0f} | {:.0f} | {:.2f} | {:.0f} | {:.0f} | {:.2f} | {:.3f} | {:.3f} | "
          "{:.2f} | {:.2f}% |\n",
          which, mb, write, dd_write, write / dd_write, read, dd_read, read / dd_read, pause, step,
          pause / step, 100.0 * pause / 60.0);
      fmt::print(
          "{}: mean step over {} steps begun with a checkpoint {:.4f} s, without {:.4f} s: {:.2f} "
          "times (medians of {} rounds; the write's share of them: {:.0f}%)\n",
          which, window, bench::median(writing), bench::median(alone),
          bench::median(writing) / bench::median(alone), rounds,
          100.0 * std::min(1.0, bench::median(writes) /
                                    (static_cast<double>(window) * bench::median(alone))));
      std::filesystem::remove_all(settings.checkpoint_dir);
    }
  }
  MPI_Finalize();
  return 0;
}
