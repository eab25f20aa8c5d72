// What the gradient-sum benchmarks (MPI's and NCCL's) sum, and how they time it: the benchmark
// models' parameter tensors, and interleaved rounds timed on every rank.
#pragma once

#include <mpi.h>

#include <functional>
#include <string>
#include <vector>

#include "core/tensor.hpp"
#include "parallel/communicator.hpp"
#include "tests/bench/bench_util.hpp"

namespace strata::bench {

struct Payload {
  std::string name;
  std::vector<Shape> shapes;  // in forward order
};

// The benchmark CNN's parameters (configs/fashion_cnn.yaml), the MLP 784-512-256-10's, and one
// 16 MiB tensor.
inline std::vector<Payload> gradient_payloads() {
  return {
      {"CNN parameters (317 066 floats)",
       {{32, 1, 5, 5}, {32}, {64, 32, 5, 5}, {64}, {256, 1024}, {256}, {10, 256}, {10}}},
      {"MLP parameters (535 818 floats)", {{512, 784}, {512}, {256, 512}, {256}, {10, 256}, {10}}},
      {"one 16 MiB tensor", {{4 << 20}}},
  };
}

// Median seconds of each operation over `repeats` rounds. The operations take turns within every
// round, so that the machine's drift (these machines are noisy) touches all of them alike. Each run
// starts together on every rank and counts the slowest rank's time.
inline std::vector<double> time_interleaved(const Communicator& world, int repeats,
                                            const std::vector<std::function<void()>>& ops) {
  std::vector<std::vector<double>> seconds(ops.size());
  for (int round = 0; round < repeats + 3; ++round)
    for (std::size_t k = 0; k < ops.size(); ++k) {
      world.barrier();
      const double t0 = MPI_Wtime();
      ops[k]();
      const double t = world.allreduce_max(static_cast<int>((MPI_Wtime() - t0) * 1e9)) * 1e-9;
      if (round >= 3) seconds[k].push_back(t);
    }
  std::vector<double> medians;
  for (auto& s : seconds) medians.push_back(median(s));
  return medians;
}

}  // namespace strata::bench
