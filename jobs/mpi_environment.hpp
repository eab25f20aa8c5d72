// RAII for MPI_Init/MPI_Finalize, for the commands that are MPI programs (run, calibrate), even on
// one rank.
#pragma once

#include <mpi.h>

namespace strata {

class MpiEnvironment {
 public:
  MpiEnvironment(int& argc, char**& argv) {
    int provided = 0;
    // Worker threads never call MPI; only the main thread does.
    MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank_);
    MPI_Comm_size(MPI_COMM_WORLD, &size_);
  }
  ~MpiEnvironment() { MPI_Finalize(); }
  MpiEnvironment(const MpiEnvironment&) = delete;
  MpiEnvironment& operator=(const MpiEnvironment&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }

 private:
  int rank_ = 0;
  int size_ = 1;
};

}  // namespace strata
