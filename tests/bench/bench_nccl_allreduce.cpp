// NCCL allreduce bus bandwidth: strata's NCCL paths against raw NCCL calls on the same device
// buffers, measured in the same run, one GPU per rank.
//
// For each payload (the benchmark CNN's and MLP's parameter tensors, and single tensors of 16 and
// 256 MiB) it times, in interleaved rounds: one raw ncclAllReduce of a flat buffer of the
// payload's bytes on a communicator made with raw calls (as nccl-tests does), then synchronized;
// the same through strata's NcclCommunicator and its watched wait; and strata's data-parallel
// gradient sum (NcclReplicaSum: one allreduce per tensor, layer by layer in backward order, on its
// own stream, then finish()). Bus bandwidth is 2(n-1)/n x bytes / time, as nccl-tests reports it.
// Rank 0 prints a Markdown table. Exits 77 where a node has fewer GPUs than ranks.
//   strata_bench_nccl_allreduce [REPEATS]
#include <cuda_runtime_api.h>
#include <mpi.h>
#include <nccl.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cuda/device_memory.hpp"
#include "cuda/nccl_collectives.hpp"
#include "cuda/replica_sum.hpp"
#include "tests/bench/gradient_payloads.hpp"

using namespace strata;

namespace {

using strata::bench::Payload;
using strata::bench::time_interleaved;

void check_nccl(ncclResult_t status, const char* call) {
  if (status != ncclSuccess)
    throw std::runtime_error(fmt::format("{}: {}", call, ncclGetErrorString(status)));
}

// The reference: a communicator made with NCCL's own calls, its unique id sent with MPI_Bcast.
class RawNccl {
 public:
  explicit RawNccl(MPI_Comm comm) {
    int rank = 0, size = 0;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &size);
    ncclUniqueId id{};
    if (rank == 0) check_nccl(ncclGetUniqueId(&id), "ncclGetUniqueId");
    MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, comm);
    check_nccl(ncclCommInitRank(&comm_, size, id, rank), "ncclCommInitRank");
  }
  ~RawNccl() {
    if (comm_ != nullptr) static_cast<void>(ncclCommDestroy(comm_));
  }
  RawNccl(const RawNccl&) = delete;
  RawNccl& operator=(const RawNccl&) = delete;
  void allreduce(float* values, std::size_t count, const cuda::Stream& stream) const {
    check_nccl(ncclAllReduce(values, values, count, ncclFloat32, ncclSum, comm_, stream.get()),
               "ncclAllReduce");
    stream.synchronize();
  }

 private:
  ncclComm_t comm_ = nullptr;
};

struct Bench {
  const Communicator& world;
  cuda::DeviceAllocator& allocator;
  RawNccl& raw;
  cuda::NcclCommunicator& nccl;
  cuda::NcclReplicaSum& replica_sum;
  int repeats;
};

std::string row(const Bench& b, const Payload& payload) {
  std::int64_t floats = 0;
  std::vector<cuda::DeviceBuffer> grads;
  for (const Shape& shape : payload.shapes) {
    const std::int64_t n = element_count(shape);
    grads.push_back(b.allocator.allocate(static_cast<std::size_t>(n)));
    floats += n;
  }
  const cuda::Stream stream, compute;
  cuda::DeviceBuffer flat = b.allocator.allocate(static_cast<std::size_t>(floats));
  // Zeros stay zeros however many rounds sum them in place.
  const std::vector<float> zeros(static_cast<std::size_t>(floats), 0.0f);
  cuda::copy_to_device(zeros, flat, stream);
  for (const auto& g : grads) cuda::copy_to_device(std::span(zeros).first(g.size()), g, stream);
  stream.synchronize();
  const auto count = static_cast<std::size_t>(floats);
  const cuda::NcclWatch unwatched;
  const auto t = time_interleaved(b.world, b.repeats,
                                  {[&] { b.raw.allreduce(flat.data(), count, stream); },
                                   [&] {
                                     b.nccl.allreduce_sum(flat.data(), count, stream.get());
                                     b.nccl.wait(stream.get(), "allreduce", unwatched);
                                   },
                                   [&] {
                                     // A layer's weight and bias together, the last layer first, as
                                     // backward hands them.
                                     for (std::size_t k = grads.size(); k > 0;
                                          k -= std::min<std::size_t>(2, k)) {
                                       std::vector<cuda::DeviceGradient> layer;
                                       for (std::size_t j = k >= 2 ? k - 2 : 0; j < k; ++j)
                                         layer.push_back({grads[j].data(), grads[j].size()});
                                       b.replica_sum.layer_ready(layer, compute);
                                     }
                                     b.replica_sum.finish(compute);
                                   }});
  const double n = b.world.size(), bytes = static_cast<double>(floats) * sizeof(float);
  // One rank moves no bytes between GPUs (bus factor 0): report bytes / time, nccl-tests' algbw.
  const double factor = n > 1 ? 2.0 * (n - 1.0) / n : 1.0;
  auto bus = [&](double seconds) { return factor * bytes / seconds / 1e9; };
  return fmt::format("| {} | {:.2f} | {:.1f} | {:.1f} | {:.2f} | {:.1f} | {:.2f} |\n", payload.name,
                     bytes / (1 << 20), bus(t[0]), bus(t[1]), t[0] / t[1], bus(t[2]), t[0] / t[2]);
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int code = 0;
  try {
    const int repeats = argc > 1 ? std::atoi(argv[1]) : 20;
    const Communicator world = Communicator::world();
    const Communicator node = world.split_shared("node");
    if (world.allreduce_min(cuda::visible_devices() >= node.size() ? 1 : 0) == 0) {
      if (world.rank() == 0)
        std::printf(
            "strata_bench_nccl_allreduce: %d ranks on a node need as many GPUs; the CUDA "
            "runtime sees %d\n",
            node.size(), cuda::visible_devices());
      code = 77;
    } else {
      const int device = cuda::bind_rank_to_device(node.rank());
      cuda::DeviceAllocator allocator(device);
      RawNccl raw(MPI_COMM_WORLD);
      cuda::NcclCommunicator nccl(world);
      cuda::NcclReplicaSum replica_sum(world, cuda::NcclWatch{});
      const Bench bench{world, allocator, raw, nccl, replica_sum, repeats};
      std::vector<Payload> payloads = strata::bench::gradient_payloads();
      payloads.push_back({"one 256 MiB tensor", {{64 << 20}}});
      cudaDeviceProp props{};
      static_cast<void>(cudaGetDeviceProperties(&props, device));
      int version = 0;
      static_cast<void>(ncclGetVersion(&version));
      std::string table = fmt::format(
          "{} ranks, one {} each, NCCL {}; median of {} interleaved rounds; {}; ratio = raw "
          "ncclAllReduce time / strata time\n\n"
          "| payload | MiB | raw ncclAllReduce GB/s | strata NcclCommunicator GB/s | ratio | "
          "strata "
          "gradient sum (per tensor, on its own stream) GB/s | ratio |\n"
          "| --- | --- | --- | --- | --- | --- | --- |\n",
          world.size(), props.name, version, repeats,
          world.size() > 1 ? "bus bandwidth = 2(n-1)/n x bytes / time"
                           : "one rank: GB/s = bytes / time (algorithm bandwidth; bus bandwidth "
                             "is 0 by definition)");
      for (const Payload& payload : payloads) table += row(bench, payload);
      if (world.rank() == 0) fmt::print("{}", table);
    }
  } catch (const std::exception& e) {
    // The other ranks may be inside a collective: end them all.
    std::fprintf(stderr, "strata_bench_nccl_allreduce: %s\n", e.what());
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  MPI_Finalize();
  return code;
}
