// Gradient-sync bus bandwidth against raw MPI_Allreduce on the same bytes, measured in the same
// run.
//
// For each payload (the benchmark CNN's and the MLP's parameter tensors, and one 16 MiB tensor) it
// times one full data-parallel gradient sync (every tensor handed over in backward order, then
// finish()), bucketed over MPI and hierarchical through a shared window, and one MPI_Allreduce of
// a single buffer of the same size. Bus bandwidth is
// 2(n-1)/n x bytes / time, as nccl-tests reports it. Rank 0 prints a Markdown table.
//   strata_bench_gradient_sync [REPEATS [WATCHDOG_S]]
// WATCHDOG_S is the stall watchdog's limit on the communicator, 300 by default as in `strata run`
// (0 = none: strata's blocking collectives are then the plain MPI calls).
#include <mpi.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "parallel/communicator.hpp"
#include "parallel/gradient_sync.hpp"
#include "parallel/hierarchical_sync.hpp"
#include "tests/bench/gradient_payloads.hpp"

using namespace strata;

namespace {

using strata::bench::Payload;
using strata::bench::time_interleaved;

// One full sync: every gradient handed over in backward order, then finish().
std::function<void()> full_sync(GradientSync& sync, std::vector<Param>& params) {
  return [&sync, &params] {
    for (std::size_t k = params.size(); k-- > 0;) sync.gradients_ready(std::span(&params[k], 1));
    sync.finish();
  };
}

std::string row(const Communicator& world, const Communicator& node, const Communicator& across,
                const Payload& payload, int repeats) {
  std::vector<Tensor> grads, values(payload.shapes.size());
  std::int64_t floats = 0;
  for (const auto& shape : payload.shapes) {
    grads.emplace_back(shape);
    grads.back().fill(1.0f);
    floats += grads.back().size();
  }
  std::vector<Param> params;
  for (std::size_t k = 0; k < grads.size(); ++k)
    params.push_back({fmt::format("p{}", k), &values[k], &grads[k]});
  DataParallelSync bucketed(world, 25.0), per_tensor(world, 0.0);
  bucketed.attach(params);
  per_tensor.attach(params);
  // The hierarchical sum binds its gradients into its window: a copy of the payload of its own.
  std::vector<Tensor> shared_grads = grads;
  std::vector<Param> shared_params = params;
  for (std::size_t k = 0; k < shared_params.size(); ++k) shared_params[k].grad = &shared_grads[k];
  HierarchicalSync hierarchical(world, node, across);
  hierarchical.attach(shared_params);
  std::vector<float> flat(static_cast<std::size_t>(floats), 1.0f);
  const auto t =
      time_interleaved(world, repeats,
                       {[&] { world.allreduce_sum(flat); },
                        [&] { world.iallreduce_sum(flat).wait(); }, full_sync(bucketed, params),
                        full_sync(per_tensor, params), full_sync(hierarchical, shared_params)});
  const double n = world.size(), bytes = static_cast<double>(floats) * sizeof(float);
  auto bus = [&](double seconds) { return 2.0 * (n - 1.0) / n * bytes / seconds / 1e9; };
  return fmt::format(
      "| {} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} |\n",
      payload.name, bytes / (1 << 20), bus(t[0]), bus(t[1]), bus(t[2]), t[0] / t[2], bus(t[3]),
      t[0] / t[3], bus(t[4]), t[0] / t[4]);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  {
    const int repeats = argc > 1 ? std::atoi(argv[1]) : 50;
    const double watchdog_s = argc > 2 ? std::atof(argv[2]) : 300.0;
    const Communicator world = Communicator::world(watchdog_s);
    const std::vector<Payload> payloads = strata::bench::gradient_payloads();
    std::string table = fmt::format(
        "{} ranks, watchdog {} s, median of {} interleaved rounds; bus bandwidth = 2(n-1)/n x "
        "bytes / time; ratio = raw "
        "MPI_Allreduce time / strata time\n\n"
        "| payload | MiB | raw MPI_Allreduce GB/s | raw MPI_Iallreduce GB/s | strata sync, 25 MiB "
        "buckets, GB/s | "
        "ratio | one allreduce per tensor GB/s | ratio | hierarchical (shared window) GB/s | "
        "ratio |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n",
        world.size(), watchdog_s, repeats);
    // The hierarchical sum's nodes as MPI sees them (this benchmark runs on one).
    const Communicator node = world.split_shared("node");
    const Communicator across = world.split(node.rank(), world.rank(), "across");
    for (const auto& payload : payloads) table += row(world, node, across, payload, repeats);
    if (world.rank() == 0) fmt::print("{}", table);
  }
  MPI_Finalize();
  return 0;
}
