// What the GPU tests share: one GPU with a stream and an allocator, uploads and downloads, and
// seeded random values.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "core/rng.hpp"
#include "cuda/device_memory.hpp"

namespace strata::test {

struct Gpu {
  // GPU 0, or `current`, which the caller has made current.
  Gpu() : Gpu(cuda::bind_rank_to_device(0)) {}
  explicit Gpu(int current) : device(current), allocator(current) {}

  int device;
  cuda::Stream stream;
  cuda::DeviceAllocator allocator;

  cuda::DeviceBuffer upload(std::span<const float> host) {
    cuda::DeviceBuffer buffer = allocator.allocate(host.size());
    cuda::copy_to_device(host, buffer, stream);
    stream.synchronize();
    return buffer;
  }
  std::vector<float> download(const cuda::DeviceBuffer& buffer) {
    std::vector<float> host(buffer.size());
    cuda::copy_to_host(buffer, host, stream);
    stream.synchronize();
    return host;
  }
};

inline std::vector<float> random_values(std::size_t n, std::uint64_t seed, float scale = 1.0f) {
  Rng rng(seed);
  std::vector<float> v(n);
  for (float& x : v) x = scale * static_cast<float>(2.0 * rng.uniform_double() - 1.0);
  return v;
}

// Within 1e-4 of the CPU's value, relative to its size (absolute below 1).
inline bool close(float gpu, float cpu, float tolerance = 1e-4f) {
  const float scale = std::max(1.0f, std::abs(cpu));
  return std::abs(gpu - cpu) <= tolerance * scale;
}

inline bool all_close(std::span<const float> gpu, std::span<const float> cpu,
                      float tolerance = 1e-4f) {
  if (gpu.size() != cpu.size()) return false;
  for (std::size_t i = 0; i < gpu.size(); ++i)
    if (!close(gpu[i], cpu[i], tolerance)) return false;
  return true;
}

}  // namespace strata::test
