// agree_on_failure: an error on some ranks of a group becomes the same error on all of them.
#include <catch2/catch.hpp>

#include <stdexcept>
#include <string>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "parallel/failure_agreement.hpp"

using namespace strata;

namespace {

// An error type agree_on_failure does not know: a group of one rank must get it back as it was.
struct LayerOutOfMemory : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace

TEST_CASE("agree_on_failure returns on every rank when no rank fails", "[mpi][agreement]") {
  const Communicator world = Communicator::world();
  int ran = 0;
  agree_on_failure(world, [&] { ++ran; });
  CHECK(ran == 1);
  CHECK(world.allreduce_sum_int64(ran) == world.size());
}

TEST_CASE("an error on the last rank alone is thrown on every rank, of its kind, naming that rank",
          "[mpi][agreement]") {
  const Communicator world = Communicator::world();
  const int last = world.size() - 1;
  const std::string expected =
      fmt::format("rank {} of the world group: no space left on device", last);
  CHECK_THROWS_MATCHES(agree_on_failure(world,
                                        [&] {
                                          if (world.rank() == last)
                                            throw DataError("no space left on device");
                                        }),
                       DataError, Catch::Message(expected));
  CHECK_THROWS_MATCHES(
      agree_on_failure(world,
                       [&] {
                         if (world.rank() == last) throw ConfigError("no GPU visible to this rank");
                       }),
      ConfigError,
      Catch::Message(fmt::format("rank {} of the world group: no GPU visible to this rank", last)));
  // A checkpoint of another model stays that kind, not a plain data error (a resume refuses it
  // instead of skipping it as damaged).
  bool mismatch = false;
  try {
    agree_on_failure(world, [&] {
      if (world.rank() == last) throw CheckpointMismatch("dataset /w has shape [64]");
    });
  } catch (const CheckpointMismatch&) {
    mismatch = true;
  } catch (const DataError&) {
  }
  CHECK(mismatch);
  // The group goes on together: a collective after the failure completes on every rank.
  CHECK(world.allreduce_max(1) == 1);
}

TEST_CASE("when several ranks fail, every rank throws the lowest failing rank's error",
          "[mpi][agreement]") {
  const Communicator world = Communicator::world();
  const int last = world.size() - 1;
  // Rank 1 a DivergedError, the last rank (on 2 ranks the same one) a ConfigError: rank 1 wins.
  CHECK_THROWS_MATCHES(agree_on_failure(world,
                                        [&] {
                                          if (world.rank() == 1)
                                            throw DivergedError("loss is nan on rank 1");
                                          if (world.rank() == last)
                                            throw ConfigError("bad value on the last rank");
                                        }),
                       DivergedError,
                       Catch::Message("rank 1 of the world group: loss is nan on rank 1"));
  // Rank 0 failing needs no rank named; what is not a std::exception becomes a runtime_error.
  CHECK_THROWS_MATCHES(agree_on_failure(world,
                                        [&] {
                                          if (world.rank() == 0) throw 42;
                                        }),
                       std::runtime_error, Catch::Message("an unknown error"));
  CHECK(world.allreduce_max(1) == 1);
}

TEST_CASE("a group of one rank gets its own exception back unchanged", "[mpi][agreement]") {
  const Communicator world = Communicator::world();
  const Communicator alone = world.split(world.rank(), 0, "alone");
  REQUIRE(alone.size() == 1);
  CHECK_THROWS_AS(agree_on_failure(alone, [] { throw LayerOutOfMemory("layer dense_1"); }),
                  LayerOutOfMemory);
}
