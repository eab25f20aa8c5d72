// The multi-GPU tests' main, under mpiexec: every rank needs a GPU of its own on its node (built
// with STRATA_SHARED_GPU: one GPU on the node, which the ranks share). Where a node has fewer,
// every rank exits 77 (CTest: skipped) before any test, having agreed on it over MPI.
#define CATCH_CONFIG_RUNNER
#include <mpi.h>

#include <catch2/catch.hpp>
#include <cstdio>

#include "cuda/device_memory.hpp"

int main(int argc, char** argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int rank = 0, code = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node);
  int node_ranks = 0;
  MPI_Comm_size(node, &node_ranks);
  MPI_Comm_free(&node);
#ifdef STRATA_SHARED_GPU
  const int needed = 1;
#else
  const int needed = node_ranks;
#endif
  const int enough = strata::cuda::visible_devices() >= needed ? 1 : 0;
  int all_enough = 0;
  MPI_Allreduce(&enough, &all_enough, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
  if (all_enough == 0) {
    if (rank == 0)
      std::printf("skipped: %d ranks on a node need %d GPUs, and the CUDA runtime sees %d\n",
                  node_ranks, needed, strata::cuda::visible_devices());
    MPI_Finalize();
    return 77;
  }
  Catch::Session session;
  if (rank != 0) session.configData().reporterName = "compact";
  code = session.run(argc, argv);
  int worst = 0;
  MPI_Allreduce(&code, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  MPI_Finalize();
  return worst;
}
