// The scheduler runs a search's trials on every member group, and the search comes out the same as
// when one process drives it, whichever group finishes first; a failed trial is recorded and passed
// over. The asynchronous search, whose results depend on the order they come in, equals a serial
// replay of that order.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <numeric>
#include <set>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "hpo/genetic_search.hpp"
#include "hpo/objectives.hpp"
#include "hpo/pruning.hpp"
#include "hpo/random_search.hpp"
#include "hpo/steady_state_search.hpp"
#include "hpo/trial_scheduler.hpp"

using namespace strata;

namespace {

GeneticConfig genetic_config() {
  GeneticConfig c;
  c.population = 8;
  c.generations = 4;
  c.elitism = 1;
  c.direction = Direction::minimize;
  c.seed = 5;
  return c;
}

constexpr int failing_trial = 5;

// The fitness a trial gets, wherever it runs; trial 5 "diverges".
TrialOutcome outcome_of(const Trial& t) {
  TrialOutcome o;
  if (t.id == failing_trial) {
    o.status = TrialStatus::failed;
    o.reason = "training diverged";
    return o;
  }
  o.fitness = sphere(t.genome);
  return o;
}

// Waits an uneven time for each trial, serving meanwhile, so that groups finish out of order.
TrialOutcome evaluate_unevenly(const Trial& t, const TrialChannel& serve) {
  const double seconds = eval_seconds(EvalTime{0.003, 0.003}, 11, t.id);
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < until) {
    serve();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return outcome_of(t);
}

Topology one_group_per_rank(const Communicator& world) {
  PlanRequest request;
  request.world_size = world.size();
  request.local_batch = 1;
  return Topology(world, make_plan(request));
}

}  // namespace

TEST_CASE("random search's overlapping batches come out as a serial search's, on any schedule",
          "[mpi][hpo][scheduler]") {
  const Communicator world = Communicator::world();
  const Topology topology = one_group_per_rank(world);
  const SearchSpace space = objective_space("sphere", 3);
  const RandomConfig config{23, world.size(), std::nullopt, Direction::minimize, 4};
  for (const Assignment assignment : {Assignment::dynamic, Assignment::waves}) {
    RandomSearch search(space, config);
    std::vector<int> finished;
    SchedulerOptions options;
    options.assignment = assignment;
    run_trials(
        topology, search, evaluate_unevenly,
        [&](const Trial& t, const TrialOutcome&) { finished.push_back(t.id); }, options);
    if (world.rank() != 0) continue;
    RandomSearch serial(space, config);
    while (!serial.done())
      for (const Trial& t : serial.next_batch()) {
        const TrialOutcome o = outcome_of(t);
        serial.report(t.id, o.status == TrialStatus::ok ? o.fitness : std::nan(""),
                      o.status != TrialStatus::ok);
      }
    REQUIRE(search.trials().size() == 23);
    for (std::size_t i = 0; i < 23; ++i)
      CHECK(search.trials()[i].genome == serial.trials()[i].genome);
    CHECK(search.best()->id == serial.best()->id);
    REQUIRE(search.history().size() == serial.history().size());
    for (std::size_t b = 0; b < serial.history().size(); ++b) {
      // A batch of one failed trial (on one rank) has no best: NaN in both.
      const double best = search.history()[b].best, serial_best = serial.history()[b].best;
      CHECK((best == serial_best || (std::isnan(best) && std::isnan(serial_best))));
      CHECK(search.history()[b].trainings == serial.history()[b].trainings);
    }
    std::sort(finished.begin(), finished.end());
    std::vector<int> every(23);
    std::iota(every.begin(), every.end(), 0);
    CHECK(finished == every);  // each trial ran and was logged exactly once
  }
}

TEST_CASE("trials run on every group and the search matches a serial one",
          "[mpi][hpo][scheduler]") {
  const Communicator world = Communicator::world();
  const Topology topology = one_group_per_rank(world);
  const SearchSpace space = objective_space("sphere", 3);

  GeneticSearch search(space, genetic_config());
  std::vector<std::pair<int, TrialOutcome>> finished;
  const auto stats =
      run_trials(topology, search, evaluate_unevenly,
                 [&](const Trial& t, const TrialOutcome& o) { finished.emplace_back(t.id, o); });
  CHECK(stats.wall_seconds > 0.0);
  if (world.rank() != 0) return;

  GeneticSearch serial(space, genetic_config());
  while (!serial.done())
    for (const Trial& t : serial.next_batch()) {
      const TrialOutcome o = outcome_of(t);
      serial.report(t.id, o.status == TrialStatus::ok ? o.fitness : std::nan(""),
                    o.status != TrialStatus::ok);
    }
  REQUIRE(search.trials().size() == serial.trials().size());
  for (std::size_t i = 0; i < serial.trials().size(); ++i) {
    CHECK(search.trials()[i].genome == serial.trials()[i].genome);
    CHECK(search.trials()[i].failed == serial.trials()[i].failed);
  }
  CHECK(search.best()->id == serial.best()->id);
  // A result per training; repeated genomes (cached) took an earlier one and were not run.
  CHECK(finished.size() == static_cast<std::size_t>(serial.trainings()));
  CHECK(serial.trials().size() == static_cast<std::size_t>(serial.trainings() + serial.cached()));
  CHECK(search.trials()[failing_trial].failed);
  for (const auto& [id, o] : finished)
    if (id == failing_trial)
      CHECK(o.reason == "training diverged");  // sent along from whichever group ran it
  std::set<int> groups;
  for (const auto& [id, o] : finished) groups.insert(o.member_group);
  if (world.size() > 1) CHECK(groups.size() > 1);  // the other groups took trials too
  WARN(world.size() << " groups ran " << finished.size() << " trials; rank 0 was busy "
                    << stats.busy_seconds << " s of " << stats.wall_seconds << " s");
}

TEST_CASE("the asynchronous genetic search on the scheduler equals a serial replay of its order",
          "[mpi][hpo][scheduler][asynchronous]") {
  const Communicator world = Communicator::world();
  const Topology topology = one_group_per_rank(world);
  const SearchSpace space = objective_space("sphere", 3);
  GeneticConfig config = genetic_config();
  config.schedule = GeneticSchedule::asynchronous;
  config.slots = world.size();
  config.generations = 6;

  SteadyStateSearch search(space, config);
  std::vector<TrialResult> read_order;
  std::set<int> groups;
  run_trials(topology, search, evaluate_unevenly, [&](const Trial& t, const TrialOutcome& o) {
    read_order.push_back({t.id, o.status == TrialStatus::ok ? o.fitness : std::nan("")});
    groups.insert(o.member_group);
  });
  if (world.rank() != 0) return;
  REQUIRE(search.stop_reason() == "generations");
  CHECK(static_cast<int>(search.trials().size()) == genetic_proposals(config));
  CHECK(static_cast<int>(read_order.size()) == search.trainings());
  if (world.size() > 1) {
    CHECK(groups.size() == static_cast<std::size_t>(world.size()));
    // Uneven times: results came in out of trial order, which the replay must follow.
    CHECK_FALSE(std::is_sorted(
        read_order.begin(), read_order.end(),
        [](const TrialResult& a, const TrialResult& b) { return a.trial_id < b.trial_id; }));
  }

  SteadyStateSearch serial(space, config);
  serial.replay(read_order);
  REQUIRE(serial.trials().size() == search.trials().size());
  for (std::size_t i = 0; i < search.trials().size(); ++i) {
    INFO("trial " << i);
    CHECK(serial.trials()[i].genome == search.trials()[i].genome);
    CHECK(serial.trials()[i].step == search.trials()[i].step);
    CHECK(serial.trials()[i].copy_of == search.trials()[i].copy_of);
    CHECK(serial.trials()[i].failed == search.trials()[i].failed);
  }
  REQUIRE(serial.population().size() == search.population().size());
  for (std::size_t i = 0; i < search.population().size(); ++i)
    CHECK(serial.population()[i].trial_id == search.population()[i].trial_id);
  CHECK(serial.best()->id == search.best()->id);
  CHECK(serial.done());
}

TEST_CASE("a pruning verdict reaches every rank of the group, which stops at that epoch",
          "[mpi][hpo][scheduler][pruning]") {
  const Communicator world = Communicator::world();
  // Groups of two ranks (D = 2) where the world allows: every rank of a group must stop alike.
  PlanRequest request;
  request.world_size = world.size();
  request.local_batch = 1;
  request.max_global_batch = world.size() % 2 == 0 ? 2 : 1;
  request.fixed_data = world.size() % 2 == 0 ? 2 : 1;
  const Topology topology(world, make_plan(request));
  const SearchSpace space = objective_space("sphere", 3);
  RandomSearch search(
      space, RandomConfig{16, topology.plan().groups, std::nullopt, Direction::minimize, 8});
  constexpr int epochs = 4;
  Pruner pruner({PruneRule::median, 1, 2, 3}, Direction::minimize);
  struct Verdict {
    int trial, epoch;
    double value;
    bool stop;
  };
  std::vector<Verdict> verdicts;                  // on the coordinator, in the order it gave them
  std::vector<std::pair<int, int>> stopped_here;  // every rank: (trial, epoch) where it stopped
  std::vector<std::pair<int, TrialOutcome>> finished;
  SchedulerOptions options;
  options.epoch_verdict = [&](int trial, int epoch, double value) {
    const bool stop = pruner.report(trial, epoch, value);
    verdicts.push_back({trial, epoch, value, stop});
    return stop;
  };
  run_trials(
      topology, search,
      [&](const Trial& t, const TrialChannel& channel) {
        TrialOutcome o;
        for (int e = 1; e <= epochs; ++e) {
          // A curve that improves with the epochs, worse for genomes far from the optimum.
          const double value = sphere(t.genome) / e;
          o.fitness = value;
          o.epochs = e;
          channel.serve();
          if (e < epochs && channel.stop_after_epoch(e, value)) {
            o.status = TrialStatus::pruned;
            stopped_here.emplace_back(t.id, e);
            break;
          }
        }
        return o;
      },
      [&](const Trial& t, const TrialOutcome& o) { finished.emplace_back(t.id, o); }, options);
  // Every rank of a group stopped its trials at the same epochs: the group's ranks agree.
  std::string mine;
  for (const auto& [trial, epoch] : stopped_here) mine += fmt::format("{}@{} ", trial, epoch);
  std::string leader_view = mine;
  topology.member().broadcast_string(leader_view, 0);
  CHECK(mine == leader_view);
  if (world.rank() != 0) return;
  // The verdicts replay: a fresh pruner fed the same reports in the same order decides alike.
  Pruner replay({PruneRule::median, 1, 2, 3}, Direction::minimize);
  int stops = 0;
  for (const Verdict& v : verdicts) {
    CHECK(replay.report(v.trial, v.epoch, v.value) == v.stop);
    stops += v.stop ? 1 : 0;
  }
  CHECK(stops > 0);
  // Each trial's outcome follows its verdicts: pruned exactly at its first "stop".
  REQUIRE(finished.size() == 16);
  for (const auto& [id, o] : finished) {
    int stop_epoch = 0;
    for (const Verdict& v : verdicts)
      if (v.trial == id && v.stop && stop_epoch == 0) stop_epoch = v.epoch;
    INFO("trial " << id);
    CHECK((o.status == TrialStatus::pruned) == (stop_epoch > 0));
    CHECK(o.epochs == (stop_epoch > 0 ? stop_epoch : epochs));
  }
}

TEST_CASE("the coordinator is told which trials are in flight, each until its result comes in",
          "[mpi][hpo][scheduler]") {
  const Communicator world = Communicator::world();
  const Topology topology = one_group_per_rank(world);
  RandomSearch search(objective_space("sphere", 3),
                      RandomConfig{29, world.size(), std::nullopt, Direction::minimize, 4});
  std::set<int> finished;
  int calls = 0, most_running = 0, stale = 0, repeated = 0;
  std::map<int, double> longest;  // trial -> its largest age seen
  SchedulerOptions options;
  options.while_running = [&](const TrialsInFlight& in_flight) {
    const std::vector<TrialInFlight> running = in_flight();
    ++calls;
    most_running = std::max(most_running, static_cast<int>(running.size()));
    std::set<int> groups, trials;
    for (const TrialInFlight& r : running) {
      if (finished.contains(r.trial_id)) ++stale;
      if (!groups.insert(r.group).second || !trials.insert(r.trial_id).second) ++repeated;
      if (r.seconds < longest[r.trial_id]) ++stale;  // its age went back
      longest[r.trial_id] = r.seconds;
    }
  };
  run_trials(
      topology, search, evaluate_unevenly,
      [&](const Trial& t, const TrialOutcome&) { finished.insert(t.id); }, options);
  if (world.rank() != 0) {
    CHECK(calls == 0);  // only the coordinator is told
    return;
  }
  CHECK(calls > 0);
  CHECK(stale == 0);
  CHECK(repeated == 0);
  // Every group was busy at some point, and every trial seen in flight finished by the end.
  CHECK(most_running == world.size());
  for (const auto& [trial, seconds] : longest) CHECK(finished.contains(trial));
  CHECK(static_cast<int>(finished.size()) == static_cast<int>(search.trials().size()));
}
