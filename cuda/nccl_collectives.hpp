// NCCL collectives over the ranks of an MPI communicator (one GPU per rank), for device buffers:
// rank 0 of the group makes NCCL's unique id and broadcasts it over MPI, so that the NCCL
// communicator has exactly the group's ranks in the group's order. MPI keeps the control traffic.
#pragma once

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <cstddef>
#include <functional>
#include <span>
#include <string>
#include <utility>

#include "parallel/communicator.hpp"

namespace strata::cuda {

// How long a wait on NCCL work may take: reported every `report_s` (as the MPI watchdog reports
// a stalled MPI call), ended with ncclCommAbort after `abort_s`. 0 = never.
struct NcclWatch {
  double report_s = 0.0;
  double abort_s = 0.0;
  std::function<void(const std::string&)> report;  // empty: stderr
};

class NcclCommunicator {
 public:
  // Collective over `group`. Every rank must have made its own GPU current (bind_rank_to_device):
  // the ranks first agree over MPI that each has one, and throw CudaError alike if any has none.
  explicit NcclCommunicator(const Communicator& group);
  // Frees the communicator (nothing to free after abort()); aborts it instead while an exception
  // unwinds, since operations may still be in flight then.
  ~NcclCommunicator();
  NcclCommunicator(const NcclCommunicator&) = delete;
  NcclCommunicator& operator=(const NcclCommunicator&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

  // Each enqueues on `stream` and returns at once; the stream orders what follows.
  // Sums `count` floats over the ranks, in place.
  void allreduce_sum(float* values, std::size_t count, cudaStream_t stream) const;
  // Sums each buffer (pointer, floats) in place, as one NCCL group: small ones (biases) share
  // their launches instead of paying one each.
  void allreduce_sum_group(std::span<const std::pair<float*, std::size_t>> buffers,
                           cudaStream_t stream) const;
  // Rank r's `count` floats of `mine` land in all[r * count, (r + 1) * count).
  void allgather(const float* mine, float* all, std::size_t count, cudaStream_t stream) const;
  // Sums `in` (count x size floats) and keeps this rank's block of `count` in `out`.
  void reduce_scatter_sum(const float* in, float* out, std::size_t count,
                          cudaStream_t stream) const;
  // Root's `count` floats to every rank.
  void broadcast(float* values, std::size_t count, int root, cudaStream_t stream) const;

  // Waits until `stream` has done its work (the NCCL operations enqueued on it): reports a wait
  // past watch.report_s, naming `op`, and past watch.abort_s aborts the communicator and throws
  // CudaError. An error NCCL reports asynchronously (a peer gone) also aborts and throws.
  void wait(cudaStream_t stream, const std::string& op, const NcclWatch& watch);

  // Ends every operation in flight on this communicator, a stalled one included, and frees it
  // (ncclCommAbort): what a watchdog does on a stall. It cannot be used afterwards.
  void abort() noexcept;

 private:
  ncclComm_t comm_ = nullptr;
  int rank_ = 0, size_ = 0;
  std::string name_;
};

}  // namespace strata::cuda
