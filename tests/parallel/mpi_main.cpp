// Entry point of the MPI tests: every rank runs the same Catch2 session between MPI_Init and
// MPI_Finalize. A failure on any rank gives a non-zero exit, which mpiexec passes on to CTest.
#define CATCH_CONFIG_RUNNER
#include <mpi.h>
#include <catch2/catch.hpp>

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  Catch::Session session;
  // Only rank 0 prints the summary; every rank still prints its own failures.
  if (rank != 0) session.configData().reporterName = "compact";
  const int code = session.run(argc, argv);
  int worst = 0;
  MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
