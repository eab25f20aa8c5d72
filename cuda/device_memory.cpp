#include "cuda/device_memory.hpp"

#include <unistd.h>

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "cuda/cuda_check.hpp"

namespace strata::cuda {

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : owner_(other.owner_), block_(other.block_), bytes_(other.bytes_), floats_(other.floats_) {
  other.owner_ = nullptr;
  other.block_ = nullptr;
  other.bytes_ = other.floats_ = 0;
}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    release();
    owner_ = other.owner_;
    block_ = other.block_;
    bytes_ = other.bytes_;
    floats_ = other.floats_;
    other.owner_ = nullptr;
    other.block_ = nullptr;
    other.bytes_ = other.floats_ = 0;
  }
  return *this;
}

DeviceBuffer::~DeviceBuffer() {
  release();
}

void DeviceBuffer::release() noexcept {
  if (owner_ != nullptr && block_ != nullptr) owner_->give_back(block_, bytes_);
  owner_ = nullptr;
  block_ = nullptr;
}

std::size_t DeviceAllocator::rounded(std::size_t bytes) {
  constexpr std::size_t small = 512, large = 2u << 20, boundary = 1u << 20;
  const std::size_t step = bytes < boundary ? small : large;
  return bytes == 0 ? step : (bytes + step - 1) / step * step;
}

DeviceBuffer DeviceAllocator::allocate(std::size_t floats) {
  const std::size_t bytes = rounded(floats * sizeof(float));
  if (auto cached = free_.find(bytes); cached != free_.end()) {
    void* block = cached->second;
    free_.erase(cached);
    cached_ -= bytes;
    in_use_ += bytes;
    return DeviceBuffer(this, block, bytes, floats);
  }
  void* block = nullptr;
  cudaError_t status = cudaMalloc(&block, bytes);
  if (status == cudaErrorMemoryAllocation && cached_ > 0) {
    static_cast<void>(cudaGetLastError());  // clears the sticky-free allocation error
    release_cache();
    status = cudaMalloc(&block, bytes);
  }
  if (status != cudaSuccess)
    check(status, fmt::format("cudaMalloc of {} bytes on GPU {} ({} bytes in use, {} cached)",
                              bytes, device_, in_use_, cached_)
                      .c_str());
  in_use_ += bytes;
  return DeviceBuffer(this, block, bytes, floats);
}

void DeviceAllocator::give_back(void* block, std::size_t bytes) noexcept {
  free_.emplace(bytes, block);
  in_use_ -= bytes;
  cached_ += bytes;
}

void DeviceAllocator::release_cache() {
  for (auto& [bytes, block] : free_) static_cast<void>(cudaFree(block));
  free_.clear();
  cached_ = 0;
}

DeviceAllocator::~DeviceAllocator() {
  release_cache();
}

Stream::Stream() {
  check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
}

Stream::~Stream() {
  if (stream_ != nullptr) static_cast<void>(cudaStreamDestroy(stream_));
}

void Stream::synchronize() const {
  check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize");
}

Event::Event() {
  check(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming), "cudaEventCreate");
}

Event::~Event() {
  if (event_ != nullptr) static_cast<void>(cudaEventDestroy(event_));
}

void Event::order(const Stream& from, const Stream& to) {
  check(cudaEventRecord(event_, from.get()), "cudaEventRecord");
  check(cudaStreamWaitEvent(to.get(), event_, 0), "cudaStreamWaitEvent");
}

void Event::record(const Stream& stream) {
  check(cudaEventRecord(event_, stream.get()), "cudaEventRecord");
}

void Event::synchronize() const {
  check(cudaEventSynchronize(event_), "cudaEventSynchronize");
}

PinnedFloats::PinnedFloats(std::size_t count) : count_(count) {
  void* memory = nullptr;
  check(cudaMallocHost(&memory, std::max<std::size_t>(count, 1) * sizeof(float)), "cudaMallocHost");
  data_ = static_cast<float*>(memory);
}

PinnedFloats::~PinnedFloats() {
  if (data_ != nullptr) static_cast<void>(cudaFreeHost(data_));
}

namespace {

void check_sizes(std::size_t host, std::size_t device, const char* what) {
  if (host != device)
    throw std::invalid_argument(
        fmt::format("{}: {} host floats against a device buffer of {}", what, host, device));
}

}  // namespace

void copy_to_device(std::span<const float> host, const DeviceBuffer& device, const Stream& stream) {
  check_sizes(host.size(), device.size(), "copy_to_device");
  check(cudaMemcpyAsync(device.data(), host.data(), host.size_bytes(), cudaMemcpyHostToDevice,
                        stream.get()),
        "cudaMemcpyAsync to the device");
}

void copy_to_host(const DeviceBuffer& device, std::span<float> host, const Stream& stream) {
  check_sizes(host.size(), device.size(), "copy_to_host");
  check(cudaMemcpyAsync(host.data(), device.data(), host.size_bytes(), cudaMemcpyDeviceToHost,
                        stream.get()),
        "cudaMemcpyAsync to the host");
}

std::string device_identity(int device) {
  std::array<char, 256> host{};
  if (gethostname(host.data(), host.size() - 1) != 0) host[0] = '\0';
  std::array<char, 64> bus{};
  check(cudaDeviceGetPCIBusId(bus.data(), static_cast<int>(bus.size()), device),
        "cudaDeviceGetPCIBusId");
  return std::string(host.data()) + " " + bus.data();
}

int visible_devices() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    static_cast<void>(cudaGetLastError());
    return 0;
  }
  return count;
}

int bind_rank_to_device(int node_rank) {
  const int count = visible_devices();
  if (count == 0)
    throw CudaError(
        fmt::format("rank {} of its node needs a GPU, and the CUDA runtime sees none", node_rank));
  const int device = node_rank % count;
  check(cudaSetDevice(device), "cudaSetDevice");
  return device;
}

}  // namespace strata::cuda
