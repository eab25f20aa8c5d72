// NCCL's collectives on device buffers against MPI's on the same host values, one GPU per rank.
#include <catch2/catch.hpp>

#include <vector>

#include "cuda/nccl_collectives.hpp"
#include "tests/gpu/gpu_test_util.hpp"

using strata::Communicator;
using strata::test::Gpu;
using strata::test::random_values;

namespace {

struct NcclGroup {
  Communicator world = Communicator::world();
  Communicator node = world.split_shared("node");
  Gpu gpu{strata::cuda::bind_rank_to_device(node.rank())};
  strata::cuda::NcclCommunicator nccl{world};
};

}  // namespace

TEST_CASE("NCCL allreduce equals MPI_Allreduce on odd sizes", "[gpu][nccl]") {
  NcclGroup g;
  REQUIRE(g.nccl.rank() == g.world.rank());
  REQUIRE(g.nccl.size() == g.world.size());
  for (const std::size_t n : {std::size_t{1}, std::size_t{7}, std::size_t{(1u << 18) + 3}}) {
    auto host = random_values(n, 100 + static_cast<std::uint64_t>(g.world.rank()));
    auto device = g.gpu.upload(host);
    g.nccl.allreduce_sum(device.data(), n, g.gpu.stream.get());
    g.world.allreduce_sum(std::span<float>(host));
    const auto summed = g.gpu.download(device);
    INFO(n << " floats");
    // Ring and MPI's orders differ beyond 2 ranks: within float rounding of the sum.
    CHECK(strata::test::all_close(summed, host, 1e-6f));
    if (g.world.size() == 2) CHECK(summed == host);  // a + b either way
  }
}

TEST_CASE("NCCL allgather, reduce-scatter and broadcast equal MPI's", "[gpu][nccl]") {
  NcclGroup g;
  const std::size_t n = 1001, p = static_cast<std::size_t>(g.world.size());
  const auto mine = random_values(n, 200 + static_cast<std::uint64_t>(g.world.rank()));
  auto d_mine = g.gpu.upload(mine);
  auto d_all = g.gpu.allocator.allocate(n * p);
  g.nccl.allgather(d_mine.data(), d_all.data(), n, g.gpu.stream.get());
  std::vector<float> all(n * p);
  g.world.allgather(mine, all);
  CHECK(g.gpu.download(d_all) == all);

  const auto whole = random_values(n * p, 300 + static_cast<std::uint64_t>(g.world.rank()));
  auto d_whole = g.gpu.upload(whole);
  auto d_block = g.gpu.allocator.allocate(n);
  g.nccl.reduce_scatter_sum(d_whole.data(), d_block.data(), n, g.gpu.stream.get());
  std::vector<float> block(n);
  g.world.reduce_scatter_sum(whole, block);
  CHECK(strata::test::all_close(g.gpu.download(d_block), block, 1e-6f));

  auto root_values = random_values(n, g.world.rank() == 0 ? 400 : 401);
  auto d_root = g.gpu.upload(root_values);
  g.nccl.broadcast(d_root.data(), n, 0, g.gpu.stream.get());
  g.world.broadcast(std::span<float>(root_values), 0);
  CHECK(g.gpu.download(d_root) == root_values);
}

TEST_CASE("a stalled NCCL allreduce is reported, then aborted", "[gpu][nccl][watchdog]") {
  NcclGroup g;
  std::vector<std::string> reports;
  strata::cuda::NcclWatch watch;
  watch.report_s = 0.5;
  watch.abort_s = 2.0;
  watch.report = [&](const std::string& line) { reports.push_back(line); };
  auto buffer = g.gpu.upload(random_values(1024, 500));
  if (g.world.rank() == 0) {
    // Rank 0 alone enters the allreduce: it cannot complete.
    g.nccl.allreduce_sum(buffer.data(), 1024, g.gpu.stream.get());
    CHECK_THROWS_WITH(
        g.nccl.wait(g.gpu.stream.get(), "ncclAllReduce", watch),
        Catch::Contains("rank 0 of NCCL over world: ncclAllReduce did not complete") &&
            Catch::Contains("aborted"));
    CHECK(reports.size() >= 3);
    if (!reports.empty())
      CHECK_THAT(reports.front(), Catch::Contains("waiting 0.5 s in ncclAllReduce"));
  } else {
    g.nccl.abort();  // the other ranks never join; their communicator goes too
  }
  g.world.barrier();
}
