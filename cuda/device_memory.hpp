// Device memory on one GPU: a caching allocator (a freed block is kept by size and handed out
// again, as PyTorch's allocator does, so that a training step allocates nothing after the first),
// RAII buffers and streams, host-device copies, and which GPU a rank takes.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <map>
#include <span>
#include <string>

namespace strata::cuda {

class DeviceAllocator;

// A block of device floats. Destroying it returns the block to its allocator's cache.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer();

  float* data() const { return static_cast<float*>(block_); }
  std::size_t size() const { return floats_; }  // floats asked for
  bool empty() const { return block_ == nullptr; }

 private:
  friend class DeviceAllocator;
  DeviceBuffer(DeviceAllocator* owner, void* block, std::size_t bytes, std::size_t floats)
      : owner_(owner), block_(block), bytes_(bytes), floats_(floats) {}
  void release() noexcept;

  DeviceAllocator* owner_ = nullptr;
  void* block_ = nullptr;
  std::size_t bytes_ = 0;  // the block's rounded size
  std::size_t floats_ = 0;
};

class DeviceAllocator {
 public:
  // Allocates on `device` (cudaSetDevice is the caller's: see bind_rank_to_device).
  explicit DeviceAllocator(int device) : device_(device) {}
  // Frees the cached blocks. Every buffer must have been destroyed before.
  ~DeviceAllocator();
  DeviceAllocator(const DeviceAllocator&) = delete;
  DeviceAllocator& operator=(const DeviceAllocator&) = delete;

  // A cached block of the same rounded size if there is one, else a new one; when the device is
  // out of memory the cache is freed and the allocation tried once more. Throws CudaError.
  DeviceBuffer allocate(std::size_t floats);
  // Frees every cached block (not the buffers in use).
  void release_cache();

  int device() const { return device_; }
  std::size_t bytes_in_use() const { return in_use_; }
  std::size_t bytes_cached() const { return cached_; }
  // What a request of `bytes` is rounded to: 512 B steps below 1 MiB, 2 MiB steps above, so
  // that blocks of nearby sizes are reused.
  static std::size_t rounded(std::size_t bytes);

 private:
  friend class DeviceBuffer;
  void give_back(void* block, std::size_t bytes) noexcept;

  int device_;
  std::multimap<std::size_t, void*> free_;  // cached blocks by rounded size
  std::size_t in_use_ = 0, cached_ = 0;
};

// A CUDA stream on the current device, destroyed with its owner.
class Stream {
 public:
  Stream();
  ~Stream();
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  cudaStream_t get() const { return stream_; }
  void synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

// A CUDA event without timing, for ordering one stream's work after another's.
class Event {
 public:
  Event();
  ~Event();
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  // Marks the work enqueued on `from` so far; `to` then runs nothing enqueued later before it.
  void order(const Stream& from, const Stream& to);
  // Marks the work enqueued on `stream` so far, for synchronize().
  void record(const Stream& stream);
  // Returns when the work marked last has finished (on any thread).
  void synchronize() const;

 private:
  cudaEvent_t event_ = nullptr;
};

// Page-locked host memory, which the GPU copies to without the host waiting (cudaMallocHost),
// freed with its owner.
class PinnedFloats {
 public:
  explicit PinnedFloats(std::size_t count);
  ~PinnedFloats();
  PinnedFloats(const PinnedFloats&) = delete;
  PinnedFloats& operator=(const PinnedFloats&) = delete;
  float* data() const { return data_; }
  std::size_t size() const { return count_; }

 private:
  float* data_ = nullptr;
  std::size_t count_ = 0;
};

// Copies on `stream`; the host side must stay alive until the stream is synchronized.
void copy_to_device(std::span<const float> host, const DeviceBuffer& device, const Stream& stream);
void copy_to_host(const DeviceBuffer& device, std::span<float> host, const Stream& stream);

// Which physical GPU `device` is, across the job: this host's name and the GPU's PCI address.
// Two ranks with the same identity share a GPU, which NCCL refuses.
std::string device_identity(int device);

// GPUs the CUDA runtime can use here; 0 when it finds none (no GPU, or no driver).
int visible_devices();
// One GPU per rank: the rank with index `node_rank` among its node's ranks takes GPU
// node_rank mod (visible GPUs) and makes it current; returns its index. Throws CudaError when
// there is none.
int bind_rank_to_device(int node_rank);

}  // namespace strata::cuda
