// Scheduler efficiency: busy time / (ranks x wall time) for a genetic search of function objectives
// with uneven evaluation times, the dynamic schedule against a fixed wave-per-generation one, in
// one launch (each rank a member group). tests/bench/run_scheduler_bench.sh runs it on 1, 2 and 4
// ranks.
#include <mpi.h>

#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include <fmt/format.h>

#include "hpo/objectives.hpp"
#include "hpo/trial_scheduler.hpp"

using namespace strata;

namespace {

struct Result {
  double efficiency = 0.0, wall = 0.0;
  int trials = 0;
};

Result measure(const Topology& topology, const EvalTime& time, Assignment assignment) {
  GeneticConfig config;
  config.population = 32;
  config.generations = 4;
  config.elitism = 1;
  config.direction = Direction::minimize;
  config.seed = 1;
  GeneticSearch search(objective_space("sphere", 5), config);
  const auto stats = run_trials(
      topology, search,
      [&](const Trial& t, const std::function<void()>& serve) {
        const auto until = std::chrono::steady_clock::now() +
                           std::chrono::duration<double>(eval_seconds(time, 7, t.id));
        while (std::chrono::steady_clock::now() <
               until) {  // an evaluation that waits, as a training would
          serve();
          std::this_thread::sleep_for(std::chrono::microseconds(200));
        }
        TrialOutcome o;
        o.fitness = sphere(t.genome);
        return o;
      },
      {}, assignment);
  double busy = stats.busy_seconds, wall = stats.wall_seconds;
  MPI_Allreduce(MPI_IN_PLACE, &busy, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
  MPI_Allreduce(MPI_IN_PLACE, &wall, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return {busy / (topology.plan().world_size * wall), wall, search.trainings()};
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
    const EvalTime time{argc > 1 ? std::atof(argv[1]) : 0.03, argc > 2 ? std::atof(argv[2]) : 0.02};
    const Result dynamic = measure(topology, time, Assignment::dynamic);
    const Result waves = measure(topology, time, Assignment::waves);
    if (world.rank() == 0)
      fmt::print("| {} | {} | {:.2f} | {:.2f} | {:.1f} | {:.1f} |\n", world.size(), dynamic.trials,
                 dynamic.efficiency, waves.efficiency, dynamic.wall, waves.wall);
  }
  MPI_Finalize();
  return 0;
}
