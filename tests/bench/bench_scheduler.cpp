// Scheduler efficiency: busy time / (ranks x wall time) for a genetic search of function objectives
// with uneven evaluation times (uniform within +-spread of the mean: stragglers), in one launch
// (each rank a member group): the generational search scheduled dynamically and in fixed waves,
// and the asynchronous (steady-state) search. tests/bench/run_scheduler_bench.sh runs it on 1, 2
// and 4 ranks.
#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "core/rng.hpp"
#include "hpo/genetic_search.hpp"
#include "hpo/objectives.hpp"
#include "hpo/steady_state_search.hpp"
#include "hpo/trial_scheduler.hpp"

using namespace strata;

namespace {

struct Result {
  double efficiency = 0.0, wall = 0.0;
  int trainings = 0;
};

struct Spread {
  double mean_s = 0.03;
  double fraction = 0.7;  // each evaluation takes mean x (1 +- up to fraction), uniformly
};

double seconds_of(const Spread& time, int trial_id) {
  Rng rng(derive_seed(7, {static_cast<std::uint64_t>(trial_id)}));
  return time.mean_s * (1.0 + time.fraction * (2.0 * rng.uniform_double() - 1.0));
}

Result measure(const Topology& topology, const Spread& time, Assignment assignment,
               GeneticSchedule schedule) {
  GeneticConfig config;
  config.population = 32;
  config.generations = 8;
  config.elitism = 1;
  config.direction = Direction::minimize;
  config.seed = 1;
  config.schedule = schedule;
  config.slots = topology.plan().groups;
  const auto search = make_genetic_search(objective_space("sphere", 5), config);
  SchedulerOptions options;
  options.assignment = assignment;
  const auto stats = run_trials(
      topology, *search,
      [&](const Trial& t, const TrialChannel& serve) {
        const auto until = std::chrono::steady_clock::now() +
                           std::chrono::duration<double>(seconds_of(time, t.id));
        // An evaluation that waits, as a training would, and serves
        // meanwhile.
        while (std::chrono::steady_clock::now() < until) {
          serve();
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
        TrialOutcome o;
        o.fitness = sphere(t.genome);
        return o;
      },
      {}, options);
  double busy = stats.busy_seconds, wall = stats.wall_seconds;
  MPI_Allreduce(MPI_IN_PLACE, &busy, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &wall, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return {busy / (topology.plan().world_size * wall), wall, search->trainings()};
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  {
    const Communicator world = Communicator::world();
    PlanRequest request;
    request.world_size = world.size();
    request.local_batch = 1;
    const Topology topology(world, make_plan(request));
    const Spread time{argc > 1 ? std::atof(argv[1]) : 0.03, argc > 2 ? std::atof(argv[2]) : 0.7};
    const Result dynamic =
        measure(topology, time, Assignment::dynamic, GeneticSchedule::generational);
    const Result waves = measure(topology, time, Assignment::waves, GeneticSchedule::generational);
    const Result steady =
        measure(topology, time, Assignment::dynamic, GeneticSchedule::asynchronous);
    if (world.rank() == 0)
      fmt::print(
          "| {} | {} / {} | {:.3f} | {:.3f} | {:.3f} | {:.2f} | {:.2f} | {:.2f} | {:.2f} |\n",
          world.size(), dynamic.trainings, steady.trainings, waves.efficiency, dynamic.efficiency,
          steady.efficiency, steady.efficiency / dynamic.efficiency, waves.wall, dynamic.wall,
          steady.wall);
  }
  MPI_Finalize();
  return 0;
}
