#include "cuda/nccl_collectives.hpp"

#include <chrono>
#include <cstdio>
#include <exception>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "cuda/cuda_check.hpp"

namespace strata::cuda {
namespace {

void check_nccl(ncclResult_t status, const char* call) {
  if (status != ncclSuccess)
    throw CudaError(fmt::format("{} failed: {} ({})", call, static_cast<int>(status),
                                ncclGetErrorString(status)));
}

}  // namespace

NcclCommunicator::NcclCommunicator(const Communicator& group)
    : rank_(group.rank()), size_(group.size()), name_(group.name()) {
  // A rank without a current GPU would leave the others waiting inside ncclCommInitRank: agree
  // first, over MPI, and fail alike.
  int device = -1;
  const bool has_device = cudaGetDevice(&device) == cudaSuccess && device >= 0;
  static_cast<void>(cudaGetLastError());
  if (group.allreduce_min(has_device ? 1 : 0) == 0)
    throw CudaError(fmt::format("NCCL over {} ({} ranks): a rank has no GPU current ({})",
                                group.name(), size_,
                                has_device ? "another rank" : fmt::format("rank {}", rank_)));
  // Rank 0 broadcasts the id after a "1", or on failure a "0" and NCCL's error text, so that the
  // others do not wait for an id that never comes and every rank throws alike.
  ncclUniqueId id{};
  std::string bytes;
  if (rank_ == 0) {
    const ncclResult_t made = ncclGetUniqueId(&id);
    bytes = made == ncclSuccess
                ? "1" + std::string(reinterpret_cast<const char*>(&id), sizeof(id))
                : "0ncclGetUniqueId failed: " + std::string(ncclGetErrorString(made));
  }
  group.broadcast_string(bytes, 0);
  if (bytes.empty() || bytes[0] != '1' || bytes.size() != 1 + sizeof(id))
    throw CudaError(fmt::format("NCCL over {}: rank 0 has no unique id to share ({})", group.name(),
                                bytes.empty() ? std::string() : bytes.substr(1)));
  std::copy(bytes.begin() + 1, bytes.end(), reinterpret_cast<char*>(&id));
  check_nccl(ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank");
}

NcclCommunicator::~NcclCommunicator() {
  if (std::uncaught_exceptions() > 0) abort();
  if (comm_ != nullptr) static_cast<void>(ncclCommDestroy(comm_));
}

void NcclCommunicator::abort() noexcept {
  if (comm_ != nullptr) static_cast<void>(ncclCommAbort(comm_));
  comm_ = nullptr;
}

void NcclCommunicator::wait(cudaStream_t stream, const std::string& op, const NcclWatch& watch) {
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  double next_report = watch.report_s;
  for (;;) {
    const cudaError_t done = cudaStreamQuery(stream);
    if (done == cudaSuccess) return;
    if (done != cudaErrorNotReady)
      check(done, fmt::format("{} on NCCL over {}", op, name_).c_str());
    ncclResult_t async = ncclSuccess;
    if (comm_ != nullptr) check_nccl(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError");
    const double waited = std::chrono::duration<double>(Clock::now() - start).count();
    if (async != ncclSuccess || (watch.abort_s > 0 && waited >= watch.abort_s)) {
      const std::string why = async != ncclSuccess
                                  ? fmt::format("NCCL reported {}", ncclGetErrorString(async))
                                  : fmt::format("it waited {:.1f} s, past the limit of {:.1f} s",
                                                waited, watch.abort_s);
      abort();
      throw CudaError(
          fmt::format("rank {} of NCCL over {}: {} did not complete: {}; the NCCL "
                      "communicator was aborted",
                      rank_, name_, op, why));
    }
    if (watch.report_s > 0 && waited >= next_report) {
      const std::string line =
          fmt::format("[watchdog] rank {} of NCCL over {} ({} ranks): waiting {:.1f} s in {}",
                      rank_, name_, size_, waited, op);
      if (watch.report)
        watch.report(line);
      else
        std::fprintf(stderr, "%s\n", line.c_str());
      next_report += watch.report_s;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(waited < 0.001 ? 0 : 100));
  }
}

void NcclCommunicator::allreduce_sum(float* values, std::size_t count, cudaStream_t stream) const {
  check_nccl(ncclAllReduce(values, values, count, ncclFloat32, ncclSum, comm_, stream),
             "ncclAllReduce");
}

void NcclCommunicator::allreduce_sum_group(std::span<const std::pair<float*, std::size_t>> buffers,
                                           cudaStream_t stream) const {
  check_nccl(ncclGroupStart(), "ncclGroupStart");
  for (const auto& [values, count] : buffers)
    if (ncclAllReduce(values, values, count, ncclFloat32, ncclSum, comm_, stream) != ncclSuccess)
      break;  // ncclGroupEnd reports it
  check_nccl(ncclGroupEnd(), "ncclGroupEnd (allreduce)");
}

void NcclCommunicator::allgather(const float* mine, float* all, std::size_t count,
                                 cudaStream_t stream) const {
  check_nccl(ncclAllGather(mine, all, count, ncclFloat32, comm_, stream), "ncclAllGather");
}

void NcclCommunicator::reduce_scatter_sum(const float* in, float* out, std::size_t count,
                                          cudaStream_t stream) const {
  check_nccl(ncclReduceScatter(in, out, count, ncclFloat32, ncclSum, comm_, stream),
             "ncclReduceScatter");
}

void NcclCommunicator::broadcast(float* values, std::size_t count, int root,
                                 cudaStream_t stream) const {
  check_nccl(ncclBroadcast(values, values, count, ncclFloat32, root, comm_, stream),
             "ncclBroadcast");
}

}  // namespace strata::cuda
