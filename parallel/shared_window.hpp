// An MPI-3 shared-memory window over the ranks of one node: each rank's segment is plain memory
// that every rank of the node reads and writes directly (RAII over MPI_Win_allocate_shared).
#pragma once

#include <mpi.h>

#include <cstddef>
#include <span>
#include <vector>

#include "parallel/communicator.hpp"

namespace strata {

class SharedWindow {
 public:
  // Collective over `node`, whose ranks must share memory; `node` must outlive the window, and the
  // window must be destroyed before MPI_Finalize. Destroyed while an exception unwinds, it is left
  // to MPI: freeing it is collective, and the other ranks may never join. `floats`: this rank's
  // segment. Throws MpiError when MPI cannot make the window (ranks that do not share memory).
  SharedWindow(const Communicator& node, std::size_t floats);
  ~SharedWindow();
  SharedWindow(const SharedWindow&) = delete;
  SharedWindow& operator=(const SharedWindow&) = delete;

  // Rank q's segment (of the node communicator).
  std::span<float> segment(int q) const { return segments_[static_cast<std::size_t>(q)]; }
  // This rank's writes become visible to the node's ranks, after every rank of the node arrived
  // (MPI_Win_sync, a barrier, MPI_Win_sync: the unified memory model's fence). Collective.
  void fence() const;

 private:
  const Communicator& node_;
  MPI_Win window_ = MPI_WIN_NULL;
  std::vector<std::span<float>> segments_;
};

}  // namespace strata
