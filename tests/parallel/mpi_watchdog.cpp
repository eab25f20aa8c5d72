// The stall watchdog under mpiexec (parallel/watchdog.hpp). A test makes one rank late by sleeping
// (no MPI calls, as if it were computing) or by staying inside MPI without joining, with a limit of
// 0.2 s, and collects every rank's reports. As in every MPI test, all ranks make the same
// collective calls in the same order, and CHECK rather than REQUIRE before a later collective.
#include <mpi.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>

#include "parallel/communicator.hpp"

using Catch::Contains;
using Catch::EndsWith;
using Catch::StartsWith;
using strata::Communicator;
using strata::Request;
using strata::WatchdogSettings;

namespace {

constexpr double limit_s = 0.2;

// Collects this rank's watchdog reports.
struct Reports {
  std::vector<std::string> lines;
  WatchdogSettings settings(double limit, bool share_node_memory = true) {
    return {limit, [this](const std::string& line) { lines.push_back(line); }, share_node_memory};
  }
};

// Not calling MPI at all, as a rank that computes.
void sleep_s(double s) {
  std::this_thread::sleep_for(std::chrono::duration<double>(s));
}

// Inside MPI without joining anything, as a rank blocked in some other MPI call.
void poll_mpi_for(double s) {
  const double end = MPI_Wtime() + s;
  int flag = 0;
  while (MPI_Wtime() < end)
    MPI_Iprobe(MPI_ANY_SOURCE, 31999, MPI_COMM_WORLD, &flag, MPI_STATUS_IGNORE);
}

std::vector<float> ones_times(int factor, std::size_t n) {
  return std::vector<float>(n, static_cast<float>(factor));
}

// 1 + 2 + ... + n
float sum_to(int n) {
  return static_cast<float>(n * (n + 1) / 2);
}

// Checks this rank's reports of one stall: each names the rank (`head`) and the operation (`what`);
// the first one, written long before the late rank arrives, also its list (`first_list`). A later
// one may be written just as the late rank arrives, and then lists no one.
void check_stall(const std::vector<std::string>& lines, const std::string& head,
                 const std::string& what, const std::string& first_list) {
  CHECK_FALSE(lines.empty());
  for (const std::string& line : lines) {
    CHECK_THAT(line, StartsWith(head));
    CHECK_THAT(line, Contains(what));
  }
  if (!lines.empty()) CHECK_THAT(lines.front(), EndsWith(what + first_list));
}

}  // namespace

TEST_CASE("a rank late to an allreduce is reported, and the allreduce completes",
          "[mpi][watchdog]") {
  Reports reports;
  const Communicator world = Communicator::world(reports.settings(limit_s));
  const int r = world.rank(), n = world.size();
  CHECK(world.watchdog_s() == limit_s);
  world.barrier();  // call #1
  std::vector<float> v = ones_times(r + 1, 5);
  if (r == 0) sleep_s(0.7);
  world.allreduce_sum(v);  // call #2
  for (float x : v) CHECK(x == sum_to(n));
  if (r == 0) {
    CHECK(reports.lines.empty());  // it came last: nothing kept it waiting
  } else {
    // At 0.2 s, 0.4 s and about 0.6 s of waiting.
    CHECK(reports.lines.size() >= 2);
    check_stall(
        reports.lines, fmt::format("strata watchdog: rank {} (world rank {}) has waited 0.", r, r),
        "s in MPI_Allreduce on communicator 'world' (call #2 on it); ranks not arrived: ", "[0]");
  }
  world.barrier();
}

TEST_CASE("collectives without a late rank make no report", "[mpi][watchdog]") {
  Reports reports;
  const Communicator world = Communicator::world(reports.settings(1.0));
  const int r = world.rank(), n = world.size();
  world.barrier();
  std::vector<float> v = ones_times(r + 1, 1000);
  world.allreduce_sum(v);
  CHECK(v[999] == sum_to(n));
  v = ones_times(r + 1, 1000);
  world.iallreduce_sum(v).wait();
  CHECK(v[0] == sum_to(n));
  CHECK(world.allreduce_max(r) == n - 1);
  CHECK(world.allreduce_min(r) == 0);
  CHECK(world.allreduce_sum_int64(1) == n);
  CHECK(world.allreduce_sum_double(0.5) == 0.5 * n);
  std::vector<float> all(static_cast<std::size_t>(2 * n));
  world.allgather(ones_times(r, 2), all);
  CHECK(all[static_cast<std::size_t>(2 * n - 1)] == static_cast<float>(n - 1));
  std::vector<float> block(2);
  world.reduce_scatter_sum(ones_times(1, static_cast<std::size_t>(2 * n)), block);
  CHECK(block[1] == static_cast<float>(n));
  std::string text = r == 1 ? "from rank 1" : "";
  world.broadcast_string(text, 1);
  CHECK(text == "from rank 1");
  std::vector<float> got(3, -1.0f);
  const int next = (r + 1) % n, previous = (r + n - 1) % n;
  Request receiving = world.irecv(got, previous, 7);
  world.send(ones_times(r, 3), next, 7);
  receiving.wait();
  CHECK(got[2] == static_cast<float>(previous));
  world.barrier();
  CHECK(reports.lines.empty());

  CHECK(Communicator::world().watchdog_s() == 0.0);  // none unless asked for
  CHECK_THROWS_AS(Communicator::world(-1.0), std::invalid_argument);
}

TEST_CASE("a split communicator inherits the watchdog and reports in its own ranks",
          "[mpi][watchdog]") {
  Reports reports;
  const Communicator world = Communicator::world(reports.settings(limit_s));
  const Communicator reversed = world.split(0, -world.rank(), "reversed");
  CHECK(reversed.watchdog_s() == limit_s);
  const int last = reversed.size() - 1;  // world rank 0
  std::vector<float> v = ones_times(1, 4);
  if (world.rank() == 0) sleep_s(0.5);
  reversed.iallreduce_sum(v).wait();  // call #1 on it
  CHECK(v[3] == static_cast<float>(world.size()));
  if (world.rank() != 0) {
    check_stall(
        reports.lines,
        fmt::format("strata watchdog: rank {} (world rank {}) has waited", reversed.rank(),
                    world.rank()),
        "s in MPI_Iallreduce on communicator 'reversed' (call #1 on it); ranks not arrived: ",
        fmt::format("[{}] (world ranks [0])", last));
  }
  world.barrier();
}

TEST_CASE("counters on other nodes are read through RMA from a rank inside MPI",
          "[mpi][watchdog]") {
  // Every rank counts as a node of its own: all counters are read with MPI_Rget.
  Reports reports;
  const Communicator world = Communicator::world(reports.settings(limit_s, false));
  const int r = world.rank(), n = world.size();
  world.barrier();
  std::vector<float> v = ones_times(r + 1, 3);
  if (r == 0) poll_mpi_for(0.8);
  world.allreduce_sum(v);  // call #2
  CHECK(v[0] == sum_to(n));
  if (r != 0) {
    check_stall(
        reports.lines, fmt::format("strata watchdog: rank {} (world rank {})", r, r),
        "s in MPI_Allreduce on communicator 'world' (call #2 on it); ranks not arrived: ", "[0]");
  }
  world.barrier();
}

TEST_CASE("a node with no rank inside MPI is reported as not answering", "[mpi][watchdog]") {
  Reports reports;
  const Communicator world = Communicator::world(reports.settings(limit_s, false));
  const int r = world.rank(), n = world.size();
  world.barrier();
  std::vector<float> v = ones_times(r + 1, 3);
  if (r == 0) sleep_s(0.8);
  world.allreduce_sum(v);
  CHECK(v[0] == sum_to(n));
  if (r != 0) {
    // The other ranks, inside MPI, answer for themselves: they have arrived.
    check_stall(reports.lines, fmt::format("strata watchdog: rank {} (world rank {})", r, r),
                "s in MPI_Allreduce on communicator 'world' (call #2 on it); ranks not arrived: ",
                "[]; no answer from the nodes of ranks [0] (none of their ranks is inside MPI: "
                "late, or busy after arriving)");
  }
  world.barrier();
}

TEST_CASE("a late message is reported with its sender", "[mpi][watchdog]") {
  Reports reports;
  const Communicator world = Communicator::world(reports.settings(limit_s));
  const int r = world.rank();
  std::vector<float> v(2, -1.0f);
  if (r == 0) {
    sleep_s(0.5);
    world.send(ones_times(3, 2), 1, 5);
  } else if (r == 1) {
    world.recv(v, 0, 5);
    CHECK(v[1] == 3.0f);
    check_stall(reports.lines, "strata watchdog: rank 1 (world rank 1) has waited ",
                "s in MPI_Recv on communicator 'world' (from rank 0 (world rank 0), tag 5)", "");
  }
  world.barrier();
}
