// Measures what the cost model needs on this machine (`strata calibrate`): each layer's forward and
// backward, the data reads and the optimizer on one thread, whole steps on 1..cores threads, and,
// on two or more ranks of this node, MPI_Allreduce between them, a replica split over two of them,
// and all of them stepping at once in each arrangement a plan can take, with their steps' spread.
#pragma once

#include "core/config.hpp"
#include "parallel/communicator.hpp"
#include "parallel/step_cost.hpp"

namespace strata {

struct CalibrationOptions {
  int steps = 200;      // optimizer steps per timed epoch
  int repeats = 3;      // timed epochs per thread count; the median counts
  int max_threads = 0;  // 0: all cores this rank may use
};

// Collective over `world`: rank 0 trains the config's model (a search's largest trial) alone while
// the others wait idle, then every rank times allreduces, ranks 0 and 1 the split replica, and
// every rank the node's arrangements. The result is meaningful on rank 0.
// Progress lines go to stdout on rank 0.
Calibration measure_calibration(const Config& config, const Communicator& world,
                                const CalibrationOptions& options);

}  // namespace strata
