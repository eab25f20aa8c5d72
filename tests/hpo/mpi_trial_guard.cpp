// A trial's errors become a failed trial on every rank of its member group, or stop the job where
// recording them could leave a rank behind in a collective.
#include <catch2/catch.hpp>

#include <stdexcept>

#include <fmt/format.h>

#include "core/errors.hpp"
#include "hpo/trial_guard.hpp"

using namespace strata;

namespace {

// The guard's group as a stage hands it over: every rank, named as its messages name it.
Communicator member_group() {
  return Communicator::world().split(0, 0, "member");
}

TrialOutcome fitness(double value) {
  TrialOutcome o;
  o.fitness = value;
  return o;
}

}  // namespace

TEST_CASE("a build error on one rank fails the trial on every rank, with that rank's message",
          "[mpi][hpo][guard]") {
  const Communicator member = member_group();
  const int last = member.size() - 1;
  bool trained = false;
  const TrialOutcome o = run_guarded_trial(
      member, 3,
      [&] {
        if (member.rank() == last) throw std::runtime_error("cannot allocate the layer");
      },
      [&] {
        trained = true;
        return fitness(0.5);
      });
  CHECK_FALSE(trained);
  CHECK(o.status == TrialStatus::failed);
  CHECK(o.reason == fmt::format("rank {} of the member group: cannot allocate the layer", last));
  // The whole group goes on together: a collective after the failure completes on every rank.
  CHECK(member.allreduce_max(1) == 1);
}

TEST_CASE("when several ranks fail to build, every rank records the first one's message",
          "[mpi][hpo][guard]") {
  const Communicator member = member_group();
  auto fail_on = [&](auto failing) {
    return run_guarded_trial(
        member, 4,
        [&] {
          if (failing(member.rank()))
            throw std::runtime_error(fmt::format("out of memory on rank {}", member.rank()));
        },
        [] { return fitness(0.5); });
  };
  // Every rank but 0: rank 1's message, named as another rank's.
  TrialOutcome o = fail_on([](int rank) { return rank > 0; });
  CHECK(o.status == TrialStatus::failed);
  CHECK(o.reason == "rank 1 of the member group: out of memory on rank 1");
  // Rank 0 among them: its message as it is.
  o = fail_on([&](int rank) { return rank == 0 || rank == member.size() - 1; });
  CHECK(o.status == TrialStatus::failed);
  CHECK(o.reason == "out of memory on rank 0");
}

TEST_CASE("a trial that builds and trains returns the training's outcome", "[mpi][hpo][guard]") {
  const Communicator member = member_group();
  const TrialOutcome o = run_guarded_trial(
      member, 0, [] {}, [] { return fitness(0.75); });
  CHECK(o.status == TrialStatus::ok);
  CHECK(o.fitness == 0.75);
  CHECK(o.reason.empty());
}

TEST_CASE("divergence during training fails the trial on a group of several ranks",
          "[mpi][hpo][guard]") {
  const Communicator member = member_group();
  const TrialOutcome o = run_guarded_trial(
      member, 1, [] {},
      []() -> TrialOutcome {
        throw DivergedError("training diverged: the loss is nan at step 7");
      });
  CHECK(o.status == TrialStatus::failed);
  CHECK(o.reason == "training diverged: the loss is nan at step 7");
}

TEST_CASE("any error during training fails the trial of a one-rank group", "[mpi][hpo][guard]") {
  const Communicator member = member_group();
  const Communicator alone = member.split(member.rank(), 0, "alone");
  const TrialOutcome o = run_guarded_trial(
      alone, 2, [] {}, []() -> TrialOutcome { throw std::out_of_range("vector::at"); });
  CHECK(o.status == TrialStatus::failed);
  CHECK(o.reason == "error: vector::at");
}

TEST_CASE("an unexpected error during training on a group of several ranks stops the job",
          "[mpi][hpo][guard]") {
  const Communicator member = member_group();
  REQUIRE(member.size() > 1);
  try {
    run_guarded_trial(
        member, 9, [] {}, []() -> TrialOutcome { throw std::bad_alloc(); });
    FAIL("the error was swallowed");
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    CHECK(what.find("trial 9: std::bad_alloc") == 0);
    CHECK(what.find("the job stops") != std::string::npos);
  }
}
