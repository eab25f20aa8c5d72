// The caching allocator and host-device copies.
#include <catch2/catch.hpp>

#include "tests/gpu/gpu_test_util.hpp"

using strata::cuda::DeviceAllocator;
using strata::test::Gpu;

TEST_CASE("sizes round to 512 B below 1 MiB and to 2 MiB above", "[allocator]") {
  CHECK(DeviceAllocator::rounded(0) == 512);
  CHECK(DeviceAllocator::rounded(1) == 512);
  CHECK(DeviceAllocator::rounded(513) == 1024);
  CHECK(DeviceAllocator::rounded((1u << 20) - 1) == (1u << 20));
  CHECK(DeviceAllocator::rounded((1u << 20) + 1) == (2u << 20));
  CHECK(DeviceAllocator::rounded(5u << 20) == (6u << 20));
}

TEST_CASE("a freed block is cached and handed out again for the same rounded size", "[gpu]") {
  Gpu gpu;
  float* first = nullptr;
  {
    auto buffer = gpu.allocator.allocate(1000);
    first = buffer.data();
    CHECK(gpu.allocator.bytes_in_use() == 4096);
    CHECK(gpu.allocator.bytes_cached() == 0);
  }
  CHECK(gpu.allocator.bytes_in_use() == 0);
  CHECK(gpu.allocator.bytes_cached() == 4096);
  auto again = gpu.allocator.allocate(1024);  // 4096 bytes: the same block
  CHECK(again.data() == first);
  CHECK(gpu.allocator.bytes_cached() == 0);
  auto other = gpu.allocator.allocate(2000);
  CHECK(other.data() != first);
  // A moved buffer returns its block once.
  auto moved = std::move(other);
  CHECK(other.empty());
  CHECK(gpu.allocator.bytes_in_use() == 4096 + 8192);
}

TEST_CASE("values survive a round trip through the device", "[gpu]") {
  Gpu gpu;
  const auto values = strata::test::random_values(100003, 1);
  const auto buffer = gpu.upload(values);
  CHECK(gpu.download(buffer) == values);
  std::vector<float> wrong(7);
  CHECK_THROWS_WITH(strata::cuda::copy_to_host(buffer, wrong, gpu.stream),
                    Catch::Contains("7 host floats against a device buffer of 100003"));
}
