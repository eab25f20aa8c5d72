#include "parallel/shared_window.hpp"

#include <cstdio>

#include <fmt/format.h>

namespace strata {

namespace {

void check(int rc, const char* op, const Communicator& node) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(rc, text, &length);
  throw MpiError(op, node.name(), node.rank(), rc,
                 std::string(text, static_cast<std::size_t>(length)));
}

}  // namespace

SharedWindow::SharedWindow(const Communicator& node, std::size_t floats) : node_(node) {
  float* mine = nullptr;
  check(MPI_Win_allocate_shared(static_cast<MPI_Aint>(floats * sizeof(float)), sizeof(float),
                                MPI_INFO_NULL, node.handle(), &mine, &window_),
        "MPI_Win_allocate_shared", node);
  MPI_Win_set_errhandler(window_, MPI_ERRORS_RETURN);
  for (int q = 0; q < node.size(); ++q) {
    MPI_Aint bytes = 0;
    int unit = 0;
    float* base = nullptr;
    check(MPI_Win_shared_query(window_, q, &bytes, &unit, &base), "MPI_Win_shared_query", node);
    segments_.emplace_back(base, static_cast<std::size_t>(bytes) / sizeof(float));
  }
  // One passive epoch for the window's life: loads and stores, ordered by fence().
  check(MPI_Win_lock_all(MPI_MODE_NOCHECK, window_), "MPI_Win_lock_all", node);
}

SharedWindow::~SharedWindow() {
  if (window_ == MPI_WIN_NULL) return;
  const bool unlocked = MPI_Win_unlock_all(window_) == MPI_SUCCESS;  // local: this rank's epoch
  if (!may_release_collectively()) return;  // its peers may wait in the fence's barrier for ever
  if (!unlocked || MPI_Win_free(&window_) != MPI_SUCCESS)
    std::fprintf(stderr, "strata: freeing the shared-memory window on %s failed\n",
                 node_.name().c_str());
}

void SharedWindow::fence() const {
  check(MPI_Win_sync(window_), "MPI_Win_sync", node_);
  node_.barrier();
  check(MPI_Win_sync(window_), "MPI_Win_sync", node_);
}

}  // namespace strata
