// Communicator and Request under mpiexec: every rank runs every test, so each test makes the same
// collective calls in the same order on every rank. CHECK rather than REQUIRE before a later
// collective, so that one rank's failure does not leave the others waiting. Sums are of small
// integers, so float results are exact.
#include <mpi.h>
#include <catch2/catch.hpp>

#include <array>

#include <string>
#include <utility>
#include <vector>

#include "parallel/communicator.hpp"

using strata::Communicator;
using strata::MpiError;
using strata::Request;

namespace {

// 0 + 1 + ... + (n-1)
int triangle(int n) {
  return n * (n - 1) / 2;
}

}  // namespace

TEST_CASE("world duplicates MPI_COMM_WORLD", "[mpi][communicator]") {
  const Communicator world = Communicator::world();
  int rank = -1, size = -1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  CHECK(world.valid());
  CHECK(world.name() == "world");
  CHECK(world.rank() == rank);
  CHECK(world.size() == size);
  CHECK(world.size() >= 2);
  int same = MPI_UNEQUAL;
  MPI_Comm_compare(world.handle(), MPI_COMM_WORLD, &same);
  CHECK(same == MPI_CONGRUENT);  // same group and order, but its own context
  world.barrier();
}

TEST_CASE("a communicator moves and frees its handle", "[mpi][communicator]") {
  Communicator a = Communicator::world();
  const int rank = a.rank();
  Communicator b = std::move(a);
  CHECK_FALSE(a.valid());  // NOLINT(bugprone-use-after-move): documented moved-from state
  CHECK(a.rank() == -1);
  CHECK(a.size() == 0);
  CHECK(b.rank() == rank);
  CHECK(b.allreduce_max(b.rank()) == b.size() - 1);
  a = std::move(b);
  CHECK(a.valid());
  CHECK(a.allreduce_min(a.rank()) == 0);
  CHECK_THROWS_AS(b.barrier(), std::logic_error);  // NOLINT(bugprone-use-after-move)
}

TEST_CASE("allreduce sums exactly", "[mpi][communicator]") {
  const Communicator world = Communicator::world();
  const int r = world.rank(), n = world.size();

  std::vector<float> v(7);
  for (std::size_t i = 0; i < v.size(); ++i)
    v[i] = static_cast<float>((r + 1) * static_cast<int>(i + 1));
  world.allreduce_sum(v);
  for (std::size_t i = 0; i < v.size(); ++i)
    CHECK(v[i] == static_cast<float>(static_cast<int>(i + 1) * triangle(n + 1)));

  strata::Tensor t({2, 3});
  t.fill(static_cast<float>(r));
  world.allreduce_sum(t);
  for (std::int64_t i = 0; i < t.size(); ++i) CHECK(t[i] == static_cast<float>(triangle(n)));

  world.allreduce_sum(std::span<float>{});  // an empty buffer is a valid collective

  CHECK(world.allreduce_max(r * 3) == (n - 1) * 3);
  CHECK(world.allreduce_min(r - 5) == -5);
  CHECK(world.allreduce_sum_int64(std::int64_t{1} << 40) == (std::int64_t{1} << 40) * n);
  CHECK(world.allreduce_sum_double(0.5 * r) == 0.5 * triangle(n));
  std::array<double, 2> stats{0.25 * r, 1.0};
  world.allreduce_sum(stats);
  CHECK(stats[0] == 0.25 * triangle(n));
  CHECK(stats[1] == n);
}

TEST_CASE("allgather puts each rank's block in rank order", "[mpi][communicator]") {
  const Communicator world = Communicator::world();
  const int r = world.rank(), n = world.size();
  const std::vector<float> mine = {10.0f * r, 10.0f * r + 1, 10.0f * r + 2};
  std::vector<float> all(mine.size() * static_cast<std::size_t>(n), -1.0f);
  world.allgather(mine, all);
  for (int from = 0; from < n; ++from)
    for (int j = 0; j < 3; ++j)
      CHECK(all[static_cast<std::size_t>(from * 3 + j)] == 10.0f * from + j);
}

TEST_CASE("reduce_scatter keeps this rank's block of the sum", "[mpi][communicator]") {
  const Communicator world = Communicator::world();
  const int r = world.rank(), n = world.size();
  const int block = 5;
  std::vector<float> in(static_cast<std::size_t>(block * n));
  for (std::size_t k = 0; k < in.size(); ++k) in[k] = static_cast<float>(static_cast<int>(k) + r);
  std::vector<float> out(block, -1.0f);
  world.reduce_scatter_sum(in, out);
  // Sum over ranks q of (r*block + j + q).
  for (int j = 0; j < block; ++j)
    CHECK(out[static_cast<std::size_t>(j)] ==
          static_cast<float>(n * (r * block + j) + triangle(n)));
}

TEST_CASE("broadcast from a non-zero root", "[mpi][communicator]") {
  const Communicator world = Communicator::world();
  const int r = world.rank(), root = world.size() - 1;
  std::vector<float> v = {static_cast<float>(r), 2.0f * r, 3.0f * r};
  world.broadcast(v, root);
  CHECK(v == std::vector<float>{static_cast<float>(root), 2.0f * root, 3.0f * root});

  strata::Tensor t({4});
  t.fill(static_cast<float>(r));
  world.broadcast(t, 1);
  for (std::int64_t i = 0; i < t.size(); ++i) CHECK(t[i] == 1.0f);

  // Any bytes, and a length the other ranks do not know in advance.
  const std::string sent = std::string("config from rank 1:\n") + '\0' + "lr: 0.1";
  std::string text = r == 1 ? sent : std::string(static_cast<std::size_t>(r) * 50, 'x');
  world.broadcast_string(text, 1);
  CHECK(text == sent);
}

TEST_CASE("send and recv around a ring", "[mpi][communicator]") {
  const Communicator world = Communicator::world();
  const int r = world.rank(), n = world.size();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const std::vector<float> out = {static_cast<float>(r), static_cast<float>(r * r)};
  std::vector<float> in(2, -1.0f);
  // Even ranks send first and odd ranks receive first, so blocking sends cannot all wait at once.
  if (r % 2 == 0) {
    world.send(out, next, 7);
    world.recv(in, prev, 7);
  } else {
    world.recv(in, prev, 7);
    world.send(out, next, 7);
  }
  CHECK(in == std::vector<float>{static_cast<float>(prev), static_cast<float>(prev * prev)});
}

TEST_CASE("recv of a message of the wrong length throws MpiError", "[mpi][communicator]") {
  const Communicator world = Communicator::world();
  const int r = world.rank(), partner = r ^ 1;  // pairs (0,1), (2,3)
  if (partner < world.size()) {
    if (r % 2 == 0) {
      const std::vector<float> two = {1.0f, 2.0f};
      world.send(two, partner, 3);
      Request req = world.isend(two, partner, 4);
      req.wait();
    } else {
      std::vector<float> three(3);
      try {
        world.recv(three, partner, 3);
        FAIL("recv accepted a short message");
      } catch (const MpiError& e) {
        CHECK(e.op() == "MPI_Recv");
        CHECK_THAT(e.what(), Catch::Contains("expected 3 floats") && Catch::Contains("received 2"));
      }
      Request req = world.irecv(three, partner, 4);
      CHECK_THROWS_AS(req.wait(), MpiError);
      CHECK(req.done());
    }
  }
  world.barrier();
}

TEST_CASE("non-blocking collectives complete with wait_all", "[mpi][communicator]") {
  const Communicator world = Communicator::world();
  const int r = world.rank(), n = world.size();
  const auto un = static_cast<std::size_t>(n);

  std::vector<float> sum(4, static_cast<float>(r + 1));
  const std::vector<float> mine = {static_cast<float>(r), static_cast<float>(-r)};
  std::vector<float> all(2 * un);
  std::vector<float> scatter_in(3 * un, static_cast<float>(r));
  std::vector<float> scatter_out(3);
  std::vector<float> bcast(3, static_cast<float>(r));
  strata::Tensor grad({2, 2});
  grad.fill(1.0f);

  std::vector<Request> requests;
  requests.push_back(world.iallreduce_sum(sum));
  requests.push_back(world.iallgather(mine, all));
  requests.push_back(world.ireduce_scatter_sum(scatter_in, scatter_out));
  requests.push_back(world.ibroadcast(bcast, n - 1));
  requests.push_back(world.iallreduce_sum(grad));
  strata::wait_all(requests);
  for (const Request& req : requests) CHECK(req.done());

  for (float x : sum) CHECK(x == static_cast<float>(triangle(n + 1)));
  for (int q = 0; q < n; ++q) {
    CHECK(all[static_cast<std::size_t>(2 * q)] == static_cast<float>(q));
    CHECK(all[static_cast<std::size_t>(2 * q + 1)] == static_cast<float>(-q));
  }
  for (float x : scatter_out) CHECK(x == static_cast<float>(triangle(n)));
  for (float x : bcast) CHECK(x == static_cast<float>(n - 1));
  for (std::int64_t i = 0; i < grad.size(); ++i) CHECK(grad[i] == static_cast<float>(n));
}

TEST_CASE("isend and irecv around a ring", "[mpi][communicator]") {
  const Communicator world = Communicator::world();
  const int r = world.rank(), n = world.size();
  const int next = (r + 1) % n, prev = (r + n - 1) % n;
  const std::vector<float> out(5, static_cast<float>(r));
  std::vector<float> from_prev(5, -1.0f), from_next(5, -1.0f);
  std::vector<Request> requests;
  requests.push_back(world.irecv(from_prev, prev, 1));
  requests.push_back(world.irecv(from_next, next, 2));
  requests.push_back(world.isend(out, next, 1));
  requests.push_back(world.isend(out, prev, 2));
  strata::wait_all(requests);
  CHECK(from_prev == std::vector<float>(5, static_cast<float>(prev)));
  CHECK(from_next == std::vector<float>(5, static_cast<float>(next)));
}

TEST_CASE("test() polls a request to completion", "[mpi][communicator]") {
  const Communicator world = Communicator::world();
  std::vector<float> v(1000, 1.0f);
  Request req = world.iallreduce_sum(v);
  while (!req.test()) {
  }
  CHECK(req.done());
  CHECK(req.test());  // a done request stays done
  req.wait();         // and waiting on it is a no-op
  CHECK(v.front() == static_cast<float>(world.size()));
  CHECK(v.back() == static_cast<float>(world.size()));
  CHECK(Request{}.done());
}

TEST_CASE("a request that goes out of scope is waited for", "[mpi][communicator]") {
  const Communicator world = Communicator::world();
  const int n = world.size();
  std::vector<float> v(64, 1.0f);
  {
    Request req = world.iallreduce_sum(v);  // no wait(): the destructor must do it
  }
  for (float x : v) CHECK(x == static_cast<float>(n));

  // Moving keeps one owner; assigning over an active request waits for it first.
  std::vector<float> a(8, 1.0f), b(8, 2.0f);
  Request first = world.iallreduce_sum(a);
  Request moved = std::move(first);
  CHECK(first.done());  // NOLINT(bugprone-use-after-move): the moved-from request is empty
  moved = world.iallreduce_sum(b);
  for (float x : a) CHECK(x == static_cast<float>(n));
  moved.wait();
  for (float x : b) CHECK(x == static_cast<float>(2 * n));
}

TEST_CASE("split into two halves keeps collectives inside each half", "[mpi][communicator]") {
  const Communicator world = Communicator::world();
  const int r = world.rank(), n = world.size(), half = n / 2;
  const int color = r < half ? 0 : 1;
  const Communicator mine = world.split(color, r, "data");
  CHECK(mine.name() == "data");
  CHECK(mine.size() == half);
  CHECK(mine.rank() == r % half);

  // The sum of the world ranks in this half only.
  std::vector<float> v = {static_cast<float>(r)};
  mine.allreduce_sum(v);
  const int first = color * half;
  CHECK(v[0] == static_cast<float>(half * first + triangle(half)));

  std::vector<float> all(static_cast<std::size_t>(half));
  const float me = static_cast<float>(r);
  mine.allgather(std::span<const float>(&me, 1), all);
  for (int q = 0; q < half; ++q)
    CHECK(all[static_cast<std::size_t>(q)] == static_cast<float>(first + q));

  // A key reverses the order.
  const Communicator reversed = world.split(color, -r, "model");
  CHECK(reversed.rank() == half - 1 - r % half);

  // MPI_UNDEFINED leaves odd ranks out.
  const Communicator evens = world.split(r % 2 == 0 ? 0 : MPI_UNDEFINED, r, "peers");
  if (r % 2 == 0) {
    CHECK(evens.valid());
    CHECK(evens.size() == (n + 1) / 2);
    CHECK(evens.allreduce_max(1) == 1);
  } else {
    CHECK_FALSE(evens.valid());
    CHECK(evens.rank() == -1);
    CHECK(evens.size() == 0);
    try {
      evens.barrier();
      FAIL("a collective on MPI_COMM_NULL did not throw");
    } catch (const std::logic_error& e) {
      CHECK_THAT(e.what(), Catch::Contains("MPI_Barrier") && Catch::Contains("'peers'"));
    }
  }
  world.barrier();
}

TEST_CASE("split_shared groups the ranks of a node", "[mpi][communicator]") {
  const Communicator world = Communicator::world();
  const Communicator node = world.split_shared("node");
  CHECK(node.name() == "node");
  CHECK(node.size() >= 1);
  CHECK(node.size() <= world.size());
  CHECK(node.rank() >= 0);
  CHECK(node.rank() < node.size());
  // Every rank of a node agrees on its size, and the nodes' sizes add up to the world.
  CHECK(node.allreduce_min(node.size()) == node.size());
  CHECK(node.allreduce_max(node.size()) == node.size());
  CHECK(world.allreduce_sum_int64(node.rank() == 0 ? node.size() : 0) == world.size());
}

TEST_CASE("an MPI error throws MpiError naming the call and communicator", "[mpi][communicator]") {
  const Communicator world = Communicator::world();
  const int r = world.rank();
  std::vector<float> v(3, static_cast<float>(r));
  // root == size() is invalid on every rank, so every rank fails the same way and none waits.
  try {
    world.broadcast(v, world.size());
    FAIL("MPI_Bcast with an invalid root did not throw");
  } catch (const MpiError& e) {
    CHECK(e.op() == "MPI_Bcast");
    CHECK(e.communicator() == "world");
    CHECK(e.rank() == r);
    CHECK(e.code() != MPI_SUCCESS);
    const std::string what = e.what();
    CHECK_THAT(what, Catch::Contains("MPI_Bcast") && Catch::Contains("'world'") &&
                         Catch::Contains("rank " + std::to_string(r)));
  }

  const Communicator half = world.split(r % 2, r, "member");
  CHECK_THROWS_WITH(half.broadcast(v, -3),
                    Catch::Contains("MPI_Bcast") && Catch::Contains("'member'"));
  CHECK_THROWS_AS(half.ibroadcast(v, half.size()), MpiError);

  // The communicators still work after the errors.
  CHECK(world.allreduce_max(r) == world.size() - 1);
  half.allreduce_sum(v);
  CHECK(v[0] == static_cast<float>(half.allreduce_sum_int64(r)));
}

TEST_CASE("mismatched buffer sizes throw before any MPI call", "[mpi][communicator]") {
  const Communicator world = Communicator::world();
  const int r = world.rank(), n = world.size();
  const std::vector<float> mine(2, 1.0f);
  std::vector<float> wrong(2 * static_cast<std::size_t>(n) + 1);
  // Only rank 0 makes the bad call: had it entered MPI_Allgather, the allreduce below would be
  // matched against it and fail or hang.
  if (r == 0) {
    try {
      world.allgather(mine, wrong);
      FAIL("allgather accepted a mismatched output");
    } catch (const std::invalid_argument& e) {
      const std::string what = e.what();
      CHECK_THAT(what, Catch::Contains("MPI_Allgather") && Catch::Contains("'world'") &&
                           Catch::Contains(std::to_string(wrong.size())) &&
                           Catch::Contains(std::to_string(2 * n)));
    }
    CHECK_THROWS_AS(world.iallgather(mine, wrong), std::invalid_argument);
  }
  CHECK(world.allreduce_sum_int64(1) == n);

  std::vector<float> out(3);
  CHECK_THROWS_AS(world.reduce_scatter_sum(mine, out), std::invalid_argument);
  CHECK_THROWS_AS(world.ireduce_scatter_sum(mine, out), std::invalid_argument);
  CHECK(world.allreduce_sum_int64(1) == n);
}
